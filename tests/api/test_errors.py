"""The error envelope: every failure, expected or not, answers {status, code, message, details?}."""

from __future__ import annotations

import pytest


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
    # is the machine's state, a 503 (store/postgres.py unavailable_reason), not a surprise.
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
