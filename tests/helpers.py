"""Request helper and actors shared by the HTTP tests.

Every response that passes through ``Api`` is checked for the invariants of the whole API: a
request id, JSON content, the error envelope on every 4xx/5xx, and (where the OpenAPI document
describes the path) a body that matches the documented schema for that status, with the headers
documented for it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from functools import cache
from pathlib import Path
from typing import Any

import attrs
from jsonschema import Draft202012Validator
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from core.domains.records import ops_status
from core.identity import accounts, api_keys
from core.services import Services
from store.records import User, WebhookAttempt, WebhookDelivery, WebhookEndpoint, Workspace
from tests.fakes import FakeClock
from tests.servers.oidc import OidcIssuer

OPENAPI = Path(__file__).resolve().parent.parent / "static" / "openapi.json"
#: E-mail addresses holding what no e-mail field takes (core/text.py), each of which was taken
#: before issue 45: an escape sequence and a bell, a right-to-left override, a zero-width space in
#: the domain, and a line separator at the end (which ``str.strip`` trimmed).
UNPRINTABLE_EMAILS = ["z\x1b[2j\x07@x.com", "ops\u202e@example.com", "ops@exa\u200bmple.com", "ops@example.com\u2028"]


@cache
def openapi() -> dict[str, Any]:
    return json.loads(OPENAPI.read_text())


def template_regex(template: str) -> str:
    """``/v1/api-keys/{apiKeyId}/rotate`` -> ``/v1/api-keys/([^/]+)/rotate``."""
    return re.sub(r"\{[^}]+\}", "([^/]+)", template)


@cache
def _templates() -> list[tuple[str, re.Pattern[str]]]:
    return [(template, re.compile(template_regex(template))) for template in openapi()["paths"]]


def documented_template(path: str) -> str | None:
    """The document's path template that ``path`` falls under (exact paths win over templates)."""
    path = path.split("?")[0]
    if path in openapi()["paths"]:
        return path
    return next((template for template, pattern in _templates() if pattern.fullmatch(path)), None)


def documented_operation(method: str, path: str) -> dict[str, Any] | None:
    template = documented_template(path)
    return openapi()["paths"][template].get(method.lower()) if template else None


#: A UUID's spellings other than the one the API takes: ``uuid.UUID`` reads them all, the OpenAPI
#: document's patterns none (issue 45, item 3). Used with ``pytest.mark.parametrize(..., ids=...)``.
OTHER_SPELLINGS = {
    "braces": lambda i: "{" + i + "}",
    "urn": lambda i: "urn:uuid:" + i,
    "unhyphenated": lambda i: i.replace("-", ""),
    "uppercase": str.upper,
}


#: (method, path template, status) of every API response the tests received: the documented status
#: codes are checked against it at the end of a whole run (tests/conftest.py).
OBSERVED: set[tuple[str, str, int]] = set()


def check_against_openapi(method: str, path: str, status: int, body: Any, headers: Any = None) -> None:
    operation = documented_operation(method, path)
    if operation is None:
        return
    OBSERVED.add((method.upper(), documented_template(path) or "", status))
    responses = operation["responses"]
    response = responses.get(str(status)) or responses.get("default")
    assert response is not None, f"{method} {path} answered {status}, which the OpenAPI document does not list"
    if "$ref" in response:
        name = response["$ref"].rsplit("/", 1)[-1]
        response = openapi()["components"]["responses"][name]
    if headers is not None:
        check_headers(f"{method} {path} {status}", response.get("headers", {}), headers)
    content = response.get("content")
    if status == 204 or content is None:
        assert body is None, f"{method} {path} {status} should have no body"
        return
    errors = sorted(_validator(json.dumps(content["application/json"]["schema"])).iter_errors(body), key=str)
    assert not errors, f"{method} {path} {status} does not match the OpenAPI schema: {errors[0].message}"


@cache
def _validator(schema: str) -> Draft202012Validator:
    """A validator of the schema with every ``$ref`` replaced by what it names (the document has
    no cycles): resolving references as it went was most of the tests' own time (issue 49)."""
    return Draft202012Validator(_inlined(json.loads(schema)))


def _inlined(value: Any) -> Any:
    if isinstance(value, dict):
        inlined = {key: _inlined(item) for key, item in value.items() if key != "$ref"}
        if isinstance(ref := value.get("$ref"), str):
            target: Any = openapi()
            for part in ref.removeprefix("#/").split("/"):
                target = target[part]
            # Beside a reference its siblings apply too (JSON Schema 2020-12).
            return {**inlined, "allOf": [*inlined.get("allOf", []), _inlined(target)]} if inlined else _inlined(target)
        return inlined
    if isinstance(value, list):
        return [_inlined(item) for item in value]
    return value


def check_headers(what: str, documented: dict[str, Any], headers: Any) -> None:
    """Every required header the document lists for the response is there, and matches its schema."""
    for name, spec in documented.items():
        if "$ref" in spec:
            spec = openapi()["components"]["headers"][spec["$ref"].rsplit("/", 1)[-1]]
        value = headers.get(name)
        if value is None:
            assert not spec.get("required"), f"{what} lacks the documented header {name}"
            continue
        schema = spec["schema"]
        if schema.get("type") == "integer":
            assert re.fullmatch(r"[0-9]+", value), f"{what}: {name} is not an integer: {value!r}"
            value = int(value)
        errors = list(Draft202012Validator(schema).iter_errors(value))
        assert not errors, f"{what}: header {name} does not match the OpenAPI schema: {errors[0].message}"


def mark_verified(services: Services, domain: dict[str, Any]) -> None:
    """A domain's DNS verified without the verification call (which would start issuance itself)."""
    store = services.store
    row = store.domains.get(uuid.UUID(domain["orgId"]), uuid.UUID(domain["id"]))
    with store.transaction():
        store.domains.update(attrs.evolve(row, validation_status="verified", ops_status=ops_status("verified", row.cert_status)))


def mark_active(services: Services, domain: dict[str, Any], *, issued_days_ago: float = 1) -> None:
    """A domain verified and serving a certificate (opsStatus ``active``) issued ``issued_days_ago``,
    as far as its row goes, without the provider calls that would make it so."""
    store = services.store
    row = store.domains.get(uuid.UUID(domain["orgId"]), uuid.UUID(domain["id"]))
    issued = services.clock.now() - dt.timedelta(days=issued_days_ago)
    with store.transaction():
        store.domains.update(attrs.evolve(row, validation_status="verified", cert_status="active",
                                          ops_status=ops_status("verified", "active"), cert_last_issued_at=issued))


@attrs.frozen
class Response:
    status: int
    body: Any
    headers: Any

    @property
    def code(self) -> str | None:
        return self.body.get("code") if isinstance(self.body, dict) else None


class Api:
    """pytest-tornado's client with the API's invariants asserted on every response."""

    def __init__(self, client: AsyncHTTPClient, base_url: str) -> None:
        self.client = client
        self.base_url = base_url

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        raw: bytes | None = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        body = raw if raw is not None else (json.dumps(json_body).encode() if json_body is not None else None)
        if body is None and method in ("POST", "PUT", "PATCH"):
            body = b""
        if body:
            all_headers.setdefault("Content-Type", "application/json")
        request = HTTPRequest(
            self.base_url + path,
            method=method,
            body=body,
            headers=all_headers,
            allow_nonstandard_methods=True,
        )
        response = await self.client.fetch(request, raise_error=False)
        assert response.headers.get("X-Request-Id"), "every response carries a request id"
        parsed = None
        if response.code != 204:
            assert response.headers.get("Content-Type", "").startswith("application/json")
            parsed = json.loads(response.body)
        else:
            assert not response.body
        if response.code >= 400:
            assert isinstance(parsed, dict)
            assert set(parsed) <= {"status", "code", "message", "details"}, parsed
            assert parsed["status"] == response.code
            assert isinstance(parsed["code"], str) and isinstance(parsed["message"], str)
            assert "Traceback" not in response.body.decode()
        check_against_openapi(method, path, response.code, parsed, response.headers)
        return Response(response.code, parsed, response.headers)

    async def get(self, path: str, **kw: Any) -> Response:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, json_body: Any = None, **kw: Any) -> Response:
        return await self.request("POST", path, json_body=json_body, **kw)

    async def patch(self, path: str, json_body: Any = None, **kw: Any) -> Response:
        return await self.request("PATCH", path, json_body=json_body, **kw)

    async def delete(self, path: str, **kw: Any) -> Response:
        return await self.request("DELETE", path, **kw)


@attrs.frozen
class Actor:
    """A user in a workspace with a fresh session token."""

    workspace: Workspace
    user: User
    role: str
    token: str


class World:
    """Makes workspaces, members and keys through the service's own core code."""

    def __init__(self, services: Services, issuer: OidcIssuer, clock: FakeClock) -> None:
        self.services = services
        self.issuer = issuer
        self.clock = clock

    def session_token(self, email: str, **claims: Any) -> str:
        return self.issuer.mint(now=self.clock.now(), email=email, **claims)

    def owner(self, email: str | None = None, *, name: str = "Acme") -> Actor:
        email = email or f"owner-{uuid.uuid4().hex[:8]}@example.com"
        workspace, user = accounts.create_workspace(self.services, name=name, owner_email=email)
        return Actor(workspace, user, "owner", self.session_token(email))

    def member(self, workspace: Workspace, role: str, email: str | None = None) -> Actor:
        email = email or f"{role}-{uuid.uuid4().hex[:8]}@example.com"
        user = accounts.add_member(self.services, workspace_id=workspace.id, email=email, role=role)
        return Actor(workspace, user, role, self.session_token(email))

    def key(self, workspace: Workspace, scopes: list[str] | None, **fields: Any) -> str:
        request = api_keys.CreateKeyRequest(name=fields.pop("name", "automation"), scopes=scopes, **fields)
        _, secret = api_keys.create(self.services, workspace_id=workspace.id, request=request)
        return secret


async def active_domain(api, world, services, clock, apex="shop.example.com"):
    """An owner whose domain ``apex`` has an active sandbox certificate; and that certificate."""
    owner = world.owner()
    d = (await api.post("/v1/domains", {"apex": apex}, token=owner.token)).body
    mark_verified(services, d)
    summary = (await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)).body
    clock.advance(10)
    refreshed = (await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=owner.token)).body
    assert refreshed["status"] == "active", refreshed
    return owner, (await api.get(f"/v1/certificates/{summary['certificateId']}", token=owner.token)).body


def stored_deliveries(services: Services, workspace: Workspace, *kinds: tuple[str, int]) -> list[uuid.UUID]:
    """Webhook deliveries written straight to the store, one per ``(status, age in days)``, to an
    endpoint made for them (no receiver is ever contacted): for what reads the queue."""
    now = services.clock.now()
    endpoint = WebhookEndpoint(id=uuid.uuid4(), url="https://hooks.example.com/", events=[], created_at=now,
                               status="active", workspace_id=workspace.id, secret_ciphertext="x", updated_at=now)
    services.store.webhooks.insert_endpoint(endpoint)
    made = []
    for status, age_days in kinds:
        at = now - dt.timedelta(days=age_days)
        row = WebhookDelivery(id=uuid.uuid4(), event_id=uuid.uuid4(), type="cert.issued", status=status, attempt_count=1,
                              created_at=at, data={}, endpoint_id=endpoint.id, workspace_id=workspace.id,
                              last_attempt_at=at, next_attempt_at=at if status == "pending" else None)
        services.store.webhooks.insert_delivery(row)
        services.store.webhooks.update_delivery(row)
        services.store.webhooks.insert_attempt(row.id, WebhookAttempt(number=0, started_at=at, duration_ms=5,
                                                                      status_code=200, error=None))
        made.append(row.id)
    return made
