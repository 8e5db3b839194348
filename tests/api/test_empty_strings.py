"""Empty strings: the document and the server agree on which request fields refuse "".

The document is walked for every string field of every request body (but enums and patterns,
which rule out "" themselves). Each one is sent as "" inside an otherwise valid body: the server
refuses it (400 ``validation_error``) exactly when the document says ``minLength`` >= 1. A generated client or a fuzzer trusts ``minLength``; a field the server refuses
when empty but documented without it is a 400 nobody was told about.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.helpers import mark_verified, openapi
from tests.test_openapi import resolved

PUBLIC_IP = "93.184.216.34"  # published in the test DNS server; nothing ever connects to it here
VERIFIER = "v" * 43


def string_fields(schema: dict, pointer: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], int]]:
    """(pointer, minLength) of every string a body of ``schema`` may hold (but enums and patterns);
    ``"[]"`` stands for an array's items."""
    schema = resolved(schema)
    for part in schema.get("allOf", []) + schema.get("anyOf", []) + schema.get("oneOf", []):
        yield from string_fields(part, pointer)
    types = schema.get("type") if isinstance(schema.get("type"), list) else [schema.get("type")]
    if "string" in types and not {"enum", "const", "pattern"} & set(schema):
        yield pointer, schema.get("minLength", 0)
    for name, value in schema.get("properties", {}).items():
        yield from string_fields(value, (*pointer, name))
    if "array" in types:
        yield from string_fields(schema.get("items", {}), (*pointer, "[]"))


def documented_fields() -> dict[tuple[str, str], list[tuple[tuple[str, ...], int]]]:
    """(method, path template) -> its string fields, for every operation with a JSON body."""
    found = {}
    for path, item in openapi()["paths"].items():
        for method, operation in item.items():
            content = operation.get("requestBody", {}).get("content", {}) if isinstance(operation, dict) else {}
            if "application/json" in content:
                fields = sorted(set(string_fields(content["application/json"]["schema"])))
                if fields:
                    found[(method.upper(), path)] = fields
    return found


def with_empty(body: dict, pointer: tuple[str, ...]) -> dict:
    """``body`` with "" at ``pointer`` (an array holding only "" for ``"[]"``)."""
    body = copy.deepcopy(body)
    node = body
    for name, following in itertools.pairwise(pointer):
        if following == "[]":
            node[name] = [""]
            return body
        node = node.setdefault(name, {})
    node[pointer[-1]] = ""
    return body


Bodies = dict[tuple[str, str], tuple[str, str | None, dict[str, Any]]]


async def valid_bodies(api, services, world, dns) -> Callable[[], Bodies]:
    """A function giving (method, path template) -> (path, token, a valid body), with fresh names
    on every call so that creating twice is never a conflict. The domain, client and webhook the
    paths name are made once."""
    owner = world.owner()
    t = owner.token
    dns.publish("hooks.example.net", "A", PUBLIC_IP)
    domain = (await api.post("/v1/domains", {"apex": "base.example.com"}, token=t)).body
    mark_verified(services, domain)
    client = (await api.post("/v1/clients", {"name": "client"}, token=t)).body
    hook = (await api.post("/v1/webhooks", {"url": "https://hooks.example.net/x"}, token=t)).body
    d, counter = domain["id"], itertools.count()

    def make() -> Bodies:
        n = next(counter)
        return {
            ("POST", "/v1/api-keys"): ("/v1/api-keys", t, {"name": "k", "scopes": []}),
            ("POST", "/v1/domains"): ("/v1/domains", t, {"apex": f"new{n}.example.com"}),
            ("POST", "/v1/domains/bulk"): ("/v1/domains/bulk", t, {"apexList": [f"bulk{n}.example.com"]}),
            ("POST", "/v1/domains/query"): ("/v1/domains/query", t, {}),
            ("PATCH", "/v1/domains/{domainId}"): (f"/v1/domains/{d}", t, {}),
            ("POST", "/v1/clients"): ("/v1/clients", t, {"name": "c"}),
            ("PATCH", "/v1/clients/{clientId}"): (f"/v1/clients/{client['id']}", t, {}),
            ("POST", "/v1/public/signup"): ("/v1/public/signup", None,
                                           {"email": f"s{n}@example.com", "domain": f"signup{n}.example.com"}),
            ("POST", "/v1/auth/oidc/exchange"): ("/v1/auth/oidc/exchange", None, {"code": "c", "codeVerifier": VERIFIER}),
            ("POST", "/v1/domains/{domainId}/certificates/issue"): (f"/v1/domains/{d}/certificates/issue", t, {}),
            ("POST", "/v1/domains/{domainId}/issue"): (f"/v1/domains/{d}/issue", t, {}),
            ("POST", "/v1/domains/{domainId}/certificates/query"): (f"/v1/domains/{d}/certificates/query", t, {}),
            ("POST", "/v1/webhooks"): ("/v1/webhooks", t, {"url": f"https://hooks.example.net/{n}"}),
            ("PATCH", "/v1/webhooks/{webhookId}"): (f"/v1/webhooks/{hook['id']}", t, {}),
            ("POST", "/v1/verification-links"): ("/v1/verification-links", t, {"domainId": d}),
            ("POST", "/v1/team/invitations"): ("/v1/team/invitations", t, {"email": f"i{n}@example.com", "role": "operator"}),
            ("POST", "/v1/site-scan/https"): ("/v1/site-scan/https", t, {"urlOrDomain": "base.example.com"}),
        }

    return make


def refused(response) -> bool:
    return response.status == 400 and response.code == "validation_error"


@pytest.mark.gen_test
async def test_a_field_refuses_an_empty_string_exactly_when_the_document_says_min_length(api, services, world, dns):
    documented = documented_fields()
    bodies = await valid_bodies(api, services, world, dns)
    assert set(documented) <= set(bodies()), f"add a valid body for {sorted(set(documented) - set(bodies()))}"
    disagreements = []
    for operation, fields in documented.items():
        path, token, body = bodies()[operation]
        base = await api.request(operation[0], path, json_body=body, token=token)
        assert not refused(base), (operation, body, base.body)
        for pointer, min_length in fields:
            path, token, body = bodies()[operation]
            answer = await api.request(operation[0], path, json_body=with_empty(body, pointer), token=token)
            if refused(answer) != (min_length >= 1):
                disagreements.append((*operation, ".".join(pointer), min_length, answer.status, answer.body))
    assert not disagreements, disagreements
