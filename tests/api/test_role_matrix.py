"""Roles gate every domain, client and certificate-facing route as the spec's rules say."""

from __future__ import annotations

import pytest

ROUTES = [
    # (method, path template, body, writes?)
    ("POST", "/v1/domains/query", {}, False),
    ("GET", "/v1/domains/{id}", None, False),
    ("GET", "/v1/domains/{id}/delegation-record", None, False),
    ("GET", "/v1/clients", None, False),
    ("POST", "/v1/domains", {"apex": "new.example.com"}, True),
    ("POST", "/v1/domains/bulk", {"apexList": ["b.example.com"]}, True),
    ("PATCH", "/v1/domains/{id}", {"notes": "x"}, True),
    ("POST", "/v1/domains/{id}/verify-delegation", None, True),
    ("POST", "/v1/domains/{id}/recheck", None, True),
    ("POST", "/v1/clients", {"name": "c"}, True),
    ("DELETE", "/v1/domains/{id}", None, True),
]


@pytest.mark.gen_test
@pytest.mark.parametrize("role", ["owner", "admin", "operator", "read_only"])
@pytest.mark.parametrize(("method", "path", "body", "writes"), ROUTES)
async def test_role_matrix(api, world, role, method, path, body, writes):
    owner = world.owner()
    domain = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
    actor = owner if role == "owner" else world.member(owner.workspace, role)
    r = await api.request(method, path.format(id=domain["id"]), json_body=body, token=actor.token)
    if writes and role == "read_only":
        assert (r.status, r.code) == (403, "forbidden")
    else:
        assert r.status < 400, (r.status, r.body)
