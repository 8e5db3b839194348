"""Text that is not valid Unicode, or that no field can store, is refused once, as the body is read
into its request record, naming the field; unknown fields are ignored whatever they hold; no error
answer is ever empty (review finding 1). Short text follows one rule: printable (issue 37)."""

from __future__ import annotations

import pytest

from tests.api.test_certificates import issue, verified_domain


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


class TestUnknownFields:
    """Only the fields a request knows are read and stored: an unknown one may hold anything (issue 37, item 9)."""

    @pytest.mark.gen_test
    async def test_a_nul_in_an_unknown_field_is_ignored(self, api, world):
        r = await api.post("/v1/domains", {"apex": "a.example.com", "extra": "x\u0000y"}, token=world.owner().token)
        assert r.status == 201 and "extra" not in r.body

    @pytest.mark.gen_test
    async def test_a_lone_surrogate_in_an_unknown_field_and_its_name_is_ignored(self, api, world):
        r = await api.request("POST", "/v1/domains/query", raw=b'{"\\udc00": "\\udc00", "x": ["\\ud800"]}',
                              token=world.owner().token)
        assert r.status == 200

    @pytest.mark.gen_test
    async def test_an_unknown_field_inside_a_known_object_is_ignored(self, api, world):
        r = await api.post("/v1/domains/query", {"page": {"limit": 5, "note": "\u0000"}}, token=world.owner().token)
        assert r.status == 200

    @pytest.mark.gen_test
    async def test_an_idempotent_retry_that_differs_in_an_unknown_field_is_the_same_request(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        first = await issue(api, owner, d, raw=b'{"wildcard": false, "x": "\\udc00"}', headers={"Idempotency-Key": "k"})
        again = await issue(api, owner, d, raw=b'{"wildcard": false, "y": 1}', headers={"Idempotency-Key": "k"})
        assert first.status == 200 and (again.status, again.body) == (200, first.body)
        assert again.headers.get("Idempotent-Replayed") == "true"


#: One of each kind that printable text refuses (core/text.py): C0, C1, NBSP, line separator, zero
#: width space, right-to-left override, byte-order mark, private use, a noncharacter, a format
#: character beyond U+FFFF.
NOT_PRINTABLE = ["\x1b", "\x85", "\xa0", "\u2028", "\u200b", "\u202e", "\ufeff", "\ue000", "\ufffe", "\U000110bd"]


class TestPrintableText:
    """One rule for tags, the query's ``q`` and webhook event names: a tag can hold only what ``q``
    can search for (issue 37, item 10)."""

    @pytest.mark.parametrize("char", NOT_PRINTABLE)
    @pytest.mark.gen_test
    async def test_a_tag_is_refused(self, api, world, char):
        r = await api.post("/v1/domains", {"apex": "a.example.com", "tags": [f"eu{char}west"]}, token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error") and "tags" in r.body["details"]["fieldErrors"]

    @pytest.mark.parametrize("char", NOT_PRINTABLE)
    @pytest.mark.gen_test
    async def test_a_query_is_refused(self, api, world, char):
        r = await api.post("/v1/domains/query", {"q": f"eu{char}west"}, token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error") and "q" in r.body["details"]["fieldErrors"]

    @pytest.mark.parametrize("char", NOT_PRINTABLE)
    @pytest.mark.gen_test
    async def test_a_query_for_a_tag_is_refused(self, api, world, char):
        r = await api.post("/v1/domains/query", {"tags": [f"eu{char}west"]}, token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error") and "tags" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_a_tag_in_any_script_with_spaces_inside_is_kept_trimmed(self, api, world):
        r = await api.post("/v1/domains", {"apex": "a.example.com", "tags": ["  Zürich 東京 ✓ "]}, token=world.owner().token)
        assert r.status == 201 and r.body["tags"] == ["Zürich 東京 ✓"]

    @pytest.mark.gen_test
    async def test_a_tag_with_a_character_newer_than_pythons_unicode_tables_is_kept(self, api, world):
        """U+1FAE8 (Unicode 15.0), unassigned for Python 3.11: the rule is the same on every Python (issue 45)."""
        r = await api.post("/v1/domains", {"apex": "a.example.com", "tags": ["\U0001fae8"]}, token=world.owner().token)
        assert r.status == 201 and r.body["tags"] == ["\U0001fae8"]

    @pytest.mark.parametrize("char", ["\x85", "\xa0", "\u2028", "\t"])
    @pytest.mark.gen_test
    async def test_a_tag_ending_in_white_space_other_than_a_space_is_refused_not_trimmed(self, api, world, char):
        r = await api.post("/v1/domains", {"apex": "a.example.com", "tags": [f"eu{char}"]}, token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error")

    @pytest.mark.gen_test
    async def test_notes_keep_newlines_tabs_and_other_characters(self, api, world):
        notes = "line 1\nline 2\t\u202e\xa0"
        r = await api.post("/v1/domains", {"apex": "a.example.com", "notes": notes}, token=world.owner().token)
        assert r.status == 201 and r.body["notes"] == notes
