"""The error envelope: every failure, expected or not, answers {status, code, message, details?}."""

from __future__ import annotations

import json

import pytest

from tests.api.test_http_limits import Connection


class TestEnvelope:
    """Errors the HTTP layer produces itself."""

    @pytest.mark.gen_test
    async def test_unknown_api_path_is_404_not_found(self, api):
        r = await api.get("/v1/no-such-thing")
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_unsupported_method_is_405_with_allow(self, api):
        r = await api.delete("/v1/api-keys")
        assert (r.status, r.code) == (405, "method_not_allowed")
        assert r.headers["Allow"] == "GET, POST"

    @pytest.mark.gen_test
    async def test_a_method_http_does_not_know_is_405(self, api):
        r = await api.request("BREW", "/v1/api-keys")
        assert (r.status, r.code) == (405, "method_not_allowed")

    @pytest.mark.gen_test
    async def test_malformed_json_is_a_validation_error(self, api, world):
        r = await api.request("POST", "/v1/api-keys", raw=b'{"name": ', token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error")
        assert r.body["details"]["formErrors"][0].startswith("Malformed JSON body")
        assert r.body["details"]["fieldErrors"] == {}

    @pytest.mark.gen_test
    async def test_a_body_that_is_not_an_object_is_a_validation_error(self, api, world):
        r = await api.post("/v1/api-keys", ["name"], token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error")
        assert r.body["details"] == {"formErrors": ["Expected object, received array"], "fieldErrors": {}}

    @pytest.mark.gen_test
    async def test_absurdly_nested_json_is_a_validation_error(self, api, world):
        r = await api.request("POST", "/v1/api-keys", raw=b"[" * 100_000 + b"]" * 100_000, token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error")

    @pytest.mark.gen_test
    @pytest.mark.parametrize("blank", [b" ", b"\x0b", b"\n\t"])
    async def test_a_body_of_white_space_alone_is_malformed_json(self, api, world, blank):
        r = await api.request("POST", "/v1/domains/query", raw=blank, token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error") and "Malformed JSON body" in r.body["details"]["formErrors"][0]

    @pytest.mark.gen_test
    async def test_a_body_over_1_mib_is_413(self, api, world):
        r = await api.request("POST", "/v1/api-keys", raw=b" " * (1024 * 1024 + 1), token=world.owner().token)
        assert (r.status, r.code) == (413, "payload_too_large")

    @pytest.mark.gen_test
    async def test_bytes_that_are_not_utf8_are_a_validation_error(self, api, world):
        r = await api.request("POST", "/v1/api-keys", raw=b'{"name": "\xff"}', token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error")

    # The envelope is the handler's, whatever the backend; on PostgreSQL a database that goes away
    # is the machine's state, a 503 (store/postgres/pool.py unavailable_reason), not a surprise.
    @pytest.mark.sqlite_only
    @pytest.mark.gen_test
    async def test_an_unexpected_failure_is_500_with_a_request_id_and_no_traceback(self, api, world, services, caplog):
        owner = world.owner()
        key = world.key(owner.workspace, ["*"])
        services.store.db.conn.close()  # a real fault: the database goes away under the service
        r = await api.get("/v1/api-keys", token=key)
        assert (r.status, r.code) == (500, "internal_error")
        request_id = r.headers["X-Request-Id"]
        assert r.body["details"] == {"requestId": request_id}
        assert request_id in r.body["message"]
        assert any(request_id in rec.getMessage() and rec.exc_info for rec in caplog.records)

    @pytest.mark.gen_test
    async def test_every_response_has_its_own_request_id(self, api):
        first = await api.get("/v1/auth/session")
        second = await api.get("/v1/auth/session")
        assert first.headers["X-Request-Id"] != second.headers["X-Request-Id"]

    @pytest.mark.gen_test
    async def test_api_responses_are_not_cached(self, api):
        r = await api.get("/v1/auth/session")
        assert r.headers["Cache-Control"] == "no-store"


def texts(value):
    """Every string in a decoded JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)


class TestQuotedClientText:
    """A message that quotes what the client sent escapes every character that is not printable, so
    that an answer shown in a terminal runs no escape sequence and hides nothing (issue 37, item 13)."""

    @pytest.mark.parametrize(("path", "body", "escaped"), [
        ("/v1/domains/query", {"status": "\x1b[31mred"}, "\\x1b[31mred"),
        ("/v1/domains/query", {"sort": {"by": "\u202ename", "dir": "up\x85"}}, "\\u202ename"),
        ("/v1/domains", {"apex": "\x1b[2J.example.com"}, "\\x1b[2J.example.com"),
        ("/v1/api-keys", {"name": "k", "scopes": ["\x1b]0;title\x07"]}, "\\x1b]0;title\\x07"),
        ("/v1/team/invitations", {"email": "a@example.com", "role": "owner\u2028"}, "owner\\u2028"),
        ("/v1/webhooks", {"url": "https://a\x9bb.example.com/hook"}, "a\\x9bb.example.com"),
    ])
    @pytest.mark.gen_test
    async def test_a_quoted_value_is_escaped(self, api, world, path, body, escaped):
        r = await api.post(path, body, token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error")
        assert all(text.isprintable() for text in texts(r.body)), r.body
        assert escaped in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_duplicate_in_a_bulk_create_is_named_escaped(self, api, world):
        r = await api.post("/v1/domains/bulk", {"apexList": ["shop.example.com\u200b", "shop.example.com"]},
                           token=world.owner().token)
        assert r.body["rejected"][0]["reason"] == "Duplicate of 'shop.example.com\\u200b' earlier in apexList."

    @pytest.mark.gen_test
    async def test_an_unknown_path_is_quoted_escaped(self, http_server, http_port):
        """A request line is read as Latin-1, so byte 0x9b arrives as U+009B, a terminal's CSI."""
        connection = await Connection.open(http_port)
        await connection.send(b"GET /v1/x\x9b2J HTTP/1.1\r\nHost: localhost\r\n\r\n")
        status, _, body = await connection.answer()
        connection.close()
        assert (status, json.loads(body)["message"]) == (404, "No endpoint GET /v1/x\\x9b2J.")

    @pytest.mark.gen_test
    async def test_an_unknown_field_name_is_never_quoted(self, api, world):
        r = await api.post("/v1/api-keys", {"\x1b[31m": "\u0000", "name": 5}, token=world.owner().token)
        assert (r.status, r.body["details"]["fieldErrors"]) == (400, {"name": ["Expected string, received number"]})


class TestPages:
    """Non-API paths get HTML, never JSON and never a traceback."""

    @pytest.mark.gen_test
    async def test_unknown_page_is_an_html_404(self, http_client, base_url):
        r = await http_client.fetch(base_url + "/nowhere", raise_error=False)
        assert r.code == 404
        assert r.headers["Content-Type"].startswith("text/html")
        assert b"404" in r.body

    @pytest.mark.gen_test
    async def test_home_page_links_the_api_description(self, http_client, base_url):
        r = await http_client.fetch(base_url + "/")
        assert b"/v1/openapi.json" in r.body
