"""Where the OpenAPI document and the server used to disagree (review finding 13)."""

from __future__ import annotations

import pytest
from tornado.httpclient import HTTPRequest


class TestServerSide:
    """What the server answers."""

    @pytest.mark.gen_test
    async def test_api_answers_carry_no_etag_and_never_304(self, http_client, base_url, world):
        owner = world.owner()
        r = await http_client.fetch(HTTPRequest(base_url + "/v1/auth/session", headers={"Authorization": f"Bearer {owner.token}"}))
        assert "Etag" not in r.headers
        again = await http_client.fetch(
            HTTPRequest(base_url + "/v1/auth/session", headers={"Authorization": f"Bearer {owner.token}", "If-None-Match": '"x", *'}),
            raise_error=False,
        )
        assert again.code == 200

    @pytest.mark.gen_test
    async def test_a_path_id_that_is_not_utf8_is_not_found(self, api, world):
        r = await api.get("/v1/domains/%ff%fe", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_head_is_answered_like_get_without_a_body(self, http_client, base_url):
        r = await http_client.fetch(HTTPRequest(base_url + "/v1/openapi.json", method="HEAD"), raise_error=False)
        assert r.code == 200 and r.body == b"" and r.headers["Content-Type"].startswith("application/json")

    @pytest.mark.gen_test
    async def test_head_on_a_post_only_route_is_405(self, http_client, base_url):
        r = await http_client.fetch(HTTPRequest(base_url + "/v1/domains/query", method="HEAD"), raise_error=False)
        assert r.code == 405 and "POST" in r.headers["Allow"]


class TestDocumentSide:
    """What the document says, and that the server does it."""

    def test_get_session_may_be_called_without_credentials(self):
        from tests.helpers import openapi

        assert {} in openapi()["paths"]["/v1/auth/session"]["get"]["security"]

    @pytest.mark.gen_test
    async def test_null_is_the_same_as_leaving_a_field_out(self, api, world):
        from tests.helpers import openapi

        owner = world.owner()
        notes = openapi()["components"]["schemas"]["CreateDomain"]["properties"]["notes"]
        assert "null" in notes["type"]
        r = await api.post("/v1/domains", {"apex": "a.example.com", "notes": None, "tags": None, "clientId": None}, token=owner.token)
        assert r.status == 201 and "notes" not in r.body and r.body["tags"] == []
        q = await api.post("/v1/domains/query", {"q": None, "page": {"cursor": None}}, token=owner.token)
        assert q.status == 200 and q.body["total"] == 1

    @pytest.mark.gen_test
    async def test_an_empty_patch_changes_nothing(self, api, world):
        owner = world.owner()
        d = (await api.post("/v1/domains", {"apex": "a.example.com", "notes": "kept"}, token=owner.token)).body
        r = await api.patch(f"/v1/domains/{d['id']}", {}, token=owner.token)
        assert r.status == 200 and r.body["notes"] == "kept" and r.body["updatedAt"] == d["updatedAt"]

    @pytest.mark.parametrize(
        ("schema", "field"), [("CreateDomain", "apex"), ("Signup", "domain"), ("Exchange", "code")]
    )
    def test_required_text_that_may_not_be_empty_says_so(self, schema, field):
        from tests.helpers import openapi

        assert openapi()["components"]["schemas"][schema]["properties"][field]["minLength"] == 1
