"""The OpenAPI document and the application describe the same API."""

from __future__ import annotations

import json

import pytest
from tornado.web import RequestHandler

import handlers
from tests.helpers import OPENAPI, openapi, template_regex

METHODS = ("get", "post", "put", "patch", "delete")


def app_operations() -> dict[tuple[str, str], RequestHandler]:
    """(route regex, method) -> handler method, for every /v1/ route the app serves."""
    found = {}
    for pattern, handler in handlers.routes:
        if not pattern.startswith("/v1/") or pattern == r"/v1/.*":
            continue
        for method in METHODS:
            implementation = getattr(handler, method)
            if implementation is not getattr(RequestHandler, method):
                found[(pattern.replace(r"\.", "."), method)] = implementation
    return found


def documented_operations() -> dict[tuple[str, str], dict]:
    return {
        (template_regex(path), method): operation
        for path, item in openapi()["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def all_refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from all_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from all_refs(value)


class TestParity:
    """Routes and document match both ways."""

    def test_every_route_is_documented(self):
        missing = set(app_operations()) - set(documented_operations())
        assert not missing, f"routes missing from the OpenAPI document: {sorted(missing)}"

    def test_every_documented_operation_exists(self):
        extra = set(documented_operations()) - set(app_operations())
        assert not extra, f"documented operations the app does not serve: {sorted(extra)}"

    def test_documented_authorization_matches_the_handlers(self):
        for key, implementation in app_operations().items():
            operation = documented_operations()[key]
            requirement = getattr(implementation, "requirement", None)
            if requirement is None:
                assert "x-scopes" not in operation, key
                continue
            scopes = requirement["scopes"]
            assert operation["x-scopes"] == (None if scopes is None else list(scopes)), key
            assert operation["x-roles"] == list(requirement["roles"]), key

    def test_every_reference_resolves(self):
        doc = openapi()
        for ref in set(all_refs(doc)):
            node = doc
            for part in ref.removeprefix("#/").split("/"):
                node = node[part]


class TestServed:
    """GET /v1/openapi.json."""

    @pytest.mark.gen_test
    async def test_the_document_is_served_as_kept_in_the_repository(self, api):
        r = await api.get("/v1/openapi.json")
        assert r.status == 200
        assert r.body == json.loads(OPENAPI.read_text())
        assert r.body["openapi"] == "3.1.0"
