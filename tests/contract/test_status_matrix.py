"""The refusals every operation documents, reached operation by operation, straight from the served
document: no credentials (401), a body over the limit (413), a workspace the caller is not in (404),
a key or session that may not (403). What no test reaches is reported at the end of a whole run
(tests/contract/test_documented_statuses.py)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from tornado.httputil import HTTPHeaders

from core.identity.scopes import SCOPES
from tests.helpers import check_against_openapi, openapi

BEARER = {"bearer": []}
PERSON_PATHS = ("/v1/workspaces", "/v1/invitations")


async def by_hand(port: int, request: str) -> tuple[int, HTTPHeaders, dict]:
    """Send a request no HTTP client would (too large, or malformed) and read the one answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request.encode())
        await writer.drain()
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)).decode("latin-1")
        status_line, _, fields = head.partition("\r\n")
        headers = HTTPHeaders.parse(fields)
        body = await asyncio.wait_for(reader.readexactly(int(headers.get("Content-Length", "0"))), 5)
    finally:
        writer.close()
    return int(status_line.split(" ")[1]), headers, json.loads(body)


def operations(predicate) -> list[tuple[str, str, dict]]:
    found = []
    for template, item in openapi()["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation and predicate(template, operation):
                found.append((method.upper(), template, operation))
    return found


def concrete(template: str) -> str:
    """A path for the template, every parameter an id that names nothing."""
    path = template
    while "{" in path:
        start, end = path.index("{"), path.index("}")
        name = path[start + 1:end]
        path = path[:start] + ("vl_" + "x" * 43 if name == "token" else str(uuid.uuid4())) + path[end + 1:]
    return path


def needs_bearer(_: str, operation: dict) -> bool:
    return operation.get("security") == [BEARER]


def takes_a_body(_: str, operation: dict) -> bool:
    return "requestBody" in operation


def acts_in_a_workspace(template: str, operation: dict) -> bool:
    return BEARER in operation.get("security", []) and not template.startswith(PERSON_PATHS)


EVERY = operations(lambda template, _: template.startswith("/v1/"))
#: The limits of the HTTP server itself hold on every path, the health checks' included.
ANY_PATH = operations(lambda template, _: template.startswith("/v1/") or template in ("/healthz", "/readyz"))


def ids(found):
    return [f"{method} {template}" for method, template, _ in found]


WITH_BEARER = operations(needs_bearer)
WITH_BODY = operations(takes_a_body)
IN_A_WORKSPACE = operations(acts_in_a_workspace)


@pytest.mark.gen_test
@pytest.mark.parametrize(("method", "template", "operation"), WITH_BEARER, ids=ids(WITH_BEARER))
async def test_without_credentials_it_is_401(api, method, template, operation):
    r = await api.request(method, concrete(template), json_body={} if "requestBody" in operation else None)
    assert (r.status, r.code) == (401, "unauthorized")


@pytest.mark.gen_test
@pytest.mark.parametrize("content_type", ["multipart/form-data; boundary=b", "application/x-www-form-urlencoded"])
@pytest.mark.parametrize(("method", "template", "operation"), EVERY, ids=ids(EVERY))
async def test_a_form_content_type_is_read_as_json_like_any_other(api, method, template, operation, content_type):
    """The JSON API parses no forms: a form body is a body that is not JSON, answered after the
    rate limits and authentication like any other (not Tornado's early 400)."""
    r = await api.request(method, concrete(template), raw=b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n",
                          headers={"Content-Type": content_type})
    assert r.code != "bad_request" and "RateLimit-Policy" in r.headers
    if operation.get("security") == [BEARER]:
        assert (r.status, r.code) == (401, "unauthorized")


@pytest.mark.gen_test
@pytest.mark.parametrize(("method", "template", "operation"), ANY_PATH, ids=ids(ANY_PATH))
async def test_a_request_that_is_not_valid_http_is_400_bad_request(http_server, http_port, method, template, operation):
    path = concrete(template)
    status, headers, body = await by_hand(http_port, f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: x\r\n\r\n")
    check_against_openapi(method, path, status, body, headers)
    assert (status, body["code"], headers["Connection"]) == (400, "bad_request", "close")


@pytest.mark.gen_test
@pytest.mark.parametrize(("method", "template", "operation"), ANY_PATH, ids=ids(ANY_PATH))
async def test_headers_over_32_kib_are_431(http_server, http_port, method, template, operation):
    path = concrete(template)
    status, headers, body = await by_hand(http_port, f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nX-Big: {'a' * 40_000}\r\n\r\n")
    check_against_openapi(method, path, status, body, headers)
    assert (status, body["code"]) == (431, "header_fields_too_large")


@pytest.mark.gen_test
@pytest.mark.parametrize(("method", "template", "operation"), ANY_PATH, ids=ids(ANY_PATH))
async def test_a_body_over_1_mib_is_413(api, world, method, template, operation):
    r = await api.request(method, concrete(template), raw=b" " * (1024 * 1024 + 1), token=world.owner().token)
    assert (r.status, r.code) == (413, "payload_too_large")


@pytest.mark.gen_test
@pytest.mark.parametrize(("method", "template", "operation"), IN_A_WORKSPACE, ids=ids(IN_A_WORKSPACE))
async def test_a_workspace_the_caller_is_not_in_is_404(api, world, method, template, operation):
    stranger = world.owner()
    r = await api.request(method, concrete(template), json_body={} if "requestBody" in operation else None,
                          token=world.owner().token, headers={"X-Workspace-Id": str(stranger.workspace.id)})
    assert (r.status, r.body["message"]) == (404, "Workspace not found.")


def refused_key_scopes(template: str, operation: dict) -> list[str] | None:
    """Scopes that do not grant the operation, or None when every key is let in."""
    required = operation.get("x-scopes", "person")
    if required is None or required == ["*"] or template.startswith(PERSON_PATHS):
        return ["domains:read"]  # no key may (or only *): a narrow key is refused
    if not required:
        return None
    return [next(scope for scope in SCOPES if scope not in required and scope != "*")]


KEYS_REFUSED = [(m, t, o) for m, t, o in operations(lambda t, o: BEARER in o.get("security", []))
                if refused_key_scopes(t, o) is not None]


@pytest.mark.gen_test
@pytest.mark.parametrize(("method", "template", "operation"), KEYS_REFUSED, ids=ids(KEYS_REFUSED))
async def test_a_key_that_does_not_grant_it_is_403(api, world, method, template, operation):
    key = world.key(world.owner().workspace, refused_key_scopes(template, operation))
    r = await api.request(method, concrete(template), json_body={} if "requestBody" in operation else None, token=key)
    assert r.status == 403 and r.code in ("forbidden", "insufficient_scope")
