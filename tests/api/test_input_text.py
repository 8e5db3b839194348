"""Text that is not valid Unicode is refused once, in the body parser, naming the field; no error
answer is ever empty (review finding 1)."""

from __future__ import annotations

import pytest


class TestLoneSurrogates:
    """JSON escapes like \\udc00 that are no character."""

    @pytest.mark.parametrize(
        ("method", "path", "raw", "field"),
        [
            ("POST", "/v1/domains", b'{"apex": "a.example.com", "notes": "x\\udc00"}', "notes"),
            ("POST", "/v1/domains", b'{"apex": "a.example.com", "tags": ["ok", "\\ud800"]}', "tags"),
            ("POST", "/v1/domains", b'{"apex": "\\udc00.example.com"}', "apex"),
            ("POST", "/v1/domains/query", b'{"q": "\\udc00"}', "q"),
            ("POST", "/v1/domains/query", b'{"page": {"cursor": "\\udc00"}}', "page"),
            ("POST", "/v1/domains/bulk", b'{"apexList": ["\\udc00"]}', "apexList"),
            ("POST", "/v1/clients", b'{"name": "\\udc00"}', "name"),
            ("POST", "/v1/api-keys", b'{"name": "\\udc00", "scopes": []}', "name"),
            ("POST", "/v1/team/invitations", b'{"email": "\\udc00@example.com", "role": "admin"}', "email"),
        ],
    )
    @pytest.mark.gen_test
    async def test_refused_with_the_field_named(self, api, world, method, path, raw, field):
        r = await api.request(method, path, raw=raw, token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error")
        assert field in r.body["details"]["fieldErrors"] and "surrogate" in r.body["message"]

    @pytest.mark.parametrize(
        "path, raw",
        [
            ("/v1/public/signup", b'{"email": "a\\udc00@example.com", "domain": "a.example.com"}'),
            ("/v1/auth/oidc/exchange", b'{"code": "\\udc00", "codeVerifier": "' + b"v" * 43 + b'"}'),
        ],
    )
    @pytest.mark.gen_test
    async def test_refused_on_public_endpoints_too(self, api, path, raw):
        r = await api.request("POST", path, raw=raw)
        assert (r.status, r.code) == (400, "validation_error")

    @pytest.mark.gen_test
    async def test_a_surrogate_in_a_field_name_is_a_form_error(self, api, world):
        r = await api.request("POST", "/v1/domains/query", raw=b'{"\\udc00": 1}', token=world.owner().token)
        assert r.status == 400 and r.body["details"]["formErrors"]

    @pytest.mark.gen_test
    async def test_real_non_ascii_text_is_kept(self, api, world):
        r = await api.post("/v1/domains", {"apex": "a.example.com", "notes": "café 🍰"}, token=world.owner().token)
        assert r.status == 201 and r.body["notes"] == "café 🍰"


class TestNulCharacters:
    """``\\u0000`` is a character JSON may carry and SQLite would store, but PostgreSQL cannot:
    refused the same way on both backends, so an answer never depends on the store."""

    @pytest.mark.parametrize(
        ("path", "raw", "field"),
        [
            ("/v1/domains", b'{"apex": "a.example.com", "notes": "x\\u0000y"}', "notes"),
            ("/v1/domains/query", b'{"q": "\\u0000"}', "q"),
            ("/v1/clients", b'{"name": "Acme", "notes": "\\u0000"}', "notes"),
        ],
    )
    @pytest.mark.gen_test
    async def test_refused_with_the_field_named(self, api, world, path, raw, field):
        r = await api.request("POST", path, raw=raw, token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error")
        assert field in r.body["details"]["fieldErrors"] and "NUL" in r.body["message"]
