"""/v1/domains: create, bulk, get, patch, delete, delegation record, and who may do each."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from core.text import EMAIL_MESSAGE
from tests.helpers import OTHER_SPELLINGS, UNPRINTABLE_EMAILS

WRITE = ["domains:write"]
READ = ["domains:read"]


async def add(api, token, apex="shop.example.com", **fields):
    return await api.post("/v1/domains", {"apex": apex, **fields}, token=token)


class TestCreate:
    """POST /v1/domains."""

    @pytest.mark.gen_test
    async def test_a_new_domain_comes_with_both_records(self, api, world):
        owner = world.owner()
        r = await add(api, owner.token, "shop.example.com")
        assert r.status == 201
        d = r.body
        assert d["apex"] == "shop.example.com" and d["orgId"] == str(owner.workspace.id)
        assert d["tags"] == [] and d["opsStatus"] == "action_needed"
        assert d["validation"]["status"] == "pending" and d["cert"] == {"status": "none"}
        delegation, ownership = d["validation"]["delegation"], d["validation"]["ownership"]
        assert delegation["type"] == "CNAME" and delegation["host"] == "_acme-challenge.shop.example.com"
        assert re.fullmatch(r"shop\.example\.com\.[0-9a-f]{16}\.dcv\.sandbox\.invalid", delegation["value"])
        assert ownership["type"] == "TXT" and ownership["host"] == "_service-verify.shop.example.com"
        assert re.fullmatch(r"service-domain-verification=[0-9a-f]{32}", ownership["value"])
        assert delegation["ttl"] == ownership["ttl"] == 300
        assert "lastCheckedAt" not in d["validation"] and "clientId" not in d

    @pytest.mark.gen_test
    async def test_optional_fields_are_kept(self, api, world):
        owner = world.owner()
        client = (await api.post("/v1/clients", {"name": "Customer A"}, token=owner.token)).body
        r = await add(
            api, owner.token, contactEmail="dns@customer.com", clientId=client["id"], tags=["eu", "vip", "eu"], notes="hi"
        )
        assert (r.body["contactEmail"], r.body["clientId"], r.body["tags"], r.body["notes"]) == (
            "dns@customer.com", client["id"], ["eu", "vip"], "hi"
        )

    @pytest.mark.gen_test
    @pytest.mark.parametrize(
        ("given", "stored"),
        [("Shop.Example.COM.", "shop.example.com"), ("bücher.de", "xn--bcher-kva.de"), ("x.github.io", "x.github.io")],
    )
    async def test_hostnames_are_normalised(self, api, world, given, stored):
        r = await add(api, world.owner().token, given)
        assert r.status == 201 and r.body["apex"] == stored

    @pytest.mark.gen_test
    @pytest.mark.parametrize(
        ("apex", "says"),
        [
            ("*.example.com", "Wildcard hostnames are not supported"),
            ("192.0.2.10", "is an IP address"),
            ("co.uk", "is a public suffix"),
            ("localhost", "single label"),
            ("shop.internal", "special-use"),
            ("shop..example.com", "not a valid hostname"),
            ("a" * 64 + ".example.com", "not a valid hostname"),
            ("https://shop.example.com/", "leave out the scheme"),
            ("shop_1.example.com", "underscore"),
            ("", "empty"),
        ],
    )
    async def test_each_refusal_says_what_is_wrong(self, api, world, apex, says):
        r = await add(api, world.owner().token, apex)
        assert (r.status, r.code) == (400, "validation_error")
        assert says in r.body["details"]["fieldErrors"]["apex"][0]

    @pytest.mark.gen_test
    async def test_re_creating_returns_the_existing_record_with_supplied_fields_updated(self, api, world):
        owner = world.owner()
        first = (await add(api, owner.token, tags=["keep"], notes="old", contactEmail="a@customer.com")).body
        again = await add(api, owner.token, "SHOP.example.com", notes="new", contactEmail="b@customer.com")
        assert again.status == 201
        assert again.body["id"] == first["id"]
        assert (again.body["notes"], again.body["contactEmail"], again.body["tags"]) == ("new", "b@customer.com", ["keep"])
        assert again.body["validation"]["ownership"] == first["validation"]["ownership"]
        listed = await api.post("/v1/domains/query", {}, token=owner.token)
        assert listed.body["total"] == 1

    @pytest.mark.gen_test
    async def test_re_creating_without_fields_keeps_them(self, api, world):
        owner = world.owner()
        await add(api, owner.token, notes="keep me", contactEmail="a@customer.com")
        again = await add(api, owner.token)
        assert (again.body["notes"], again.body["contactEmail"]) == ("keep me", "a@customer.com")

    @pytest.mark.gen_test
    async def test_two_workspaces_get_different_ownership_values(self, api, world):
        one = (await add(api, world.owner().token)).body
        two = (await add(api, world.owner().token)).body
        assert one["validation"]["ownership"]["value"] != two["validation"]["ownership"]["value"]
        assert one["validation"]["delegation"] == two["validation"]["delegation"]

    @pytest.mark.gen_test
    async def test_one_workspace_uses_one_ownership_token(self, api, world):
        owner = world.owner()
        a = (await add(api, owner.token, "a.example.com")).body["validation"]["ownership"]["value"]
        b = (await add(api, owner.token, "b.example.com")).body["validation"]["ownership"]["value"]
        assert a == b

    @pytest.mark.gen_test
    async def test_notes_over_2000_characters_are_refused(self, api, world):
        r = await add(api, world.owner().token, notes="x" * 2001)
        assert r.status == 400 and "notes" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_wrong_types_are_field_errors(self, api, world):
        r = await api.post("/v1/domains", {"apex": 7, "tags": "a", "clientId": "nope"}, token=world.owner().token)
        errors = r.body["details"]["fieldErrors"]
        assert set(errors) == {"apex", "tags", "clientId"}

    @pytest.mark.gen_test
    async def test_a_bad_contact_email_is_refused(self, api, world):
        r = await add(api, world.owner().token, contactEmail="not an address")
        assert r.body["details"]["fieldErrors"]["contactEmail"] == [EMAIL_MESSAGE]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("email", UNPRINTABLE_EMAILS)
    async def test_a_contact_email_with_a_control_format_or_space_character_is_refused(self, api, world, email):
        r = await add(api, world.owner().token, contactEmail=email)
        assert (r.status, r.code) == (400, "validation_error")
        assert r.body["details"]["fieldErrors"]["contactEmail"] == [EMAIL_MESSAGE]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("email", UNPRINTABLE_EMAILS)
    async def test_re_adding_a_domain_with_such_a_contact_email_changes_nothing(self, api, world, email):
        owner = world.owner()
        first = (await add(api, owner.token, contactEmail="ops@example.com")).body
        r = await add(api, owner.token, contactEmail=email)
        assert (r.status, r.code) == (400, "validation_error")
        assert (await api.get(f"/v1/domains/{first['id']}", token=owner.token)).body["contactEmail"] == "ops@example.com"

    @pytest.mark.gen_test
    async def test_an_unknown_client_is_not_found(self, api, world):
        r = await add(api, world.owner().token, clientId="00000000-0000-4000-8000-000000000000")
        assert (r.status, r.code, r.body["message"]) == (404, "not_found", "Client not found.")

    @pytest.mark.gen_test
    async def test_another_workspaces_client_is_not_found(self, api, world):
        theirs = world.owner()
        client = (await api.post("/v1/clients", {"name": "Theirs"}, token=theirs.token)).body
        r = await add(api, world.owner().token, clientId=client["id"])
        assert (r.status, r.body["message"]) == (404, "Client not found.")


class TestCreateAccess:
    """Who may create."""

    @pytest.mark.gen_test
    @pytest.mark.parametrize("role", ["admin", "operator"])
    async def test_writer_roles_may(self, api, world, role):
        member = world.member(world.owner().workspace, role)
        assert (await add(api, member.token)).status == 201

    @pytest.mark.gen_test
    async def test_read_only_may_not(self, api, world):
        reader = world.member(world.owner().workspace, "read_only")
        r = await add(api, reader.token)
        assert (r.status, r.code) == (403, "forbidden")

    @pytest.mark.gen_test
    @pytest.mark.parametrize(("scopes", "status"), [(WRITE, 201), (["*"], 201), (READ, 403), (["certificates:write"], 403)])
    async def test_keys_need_domains_write(self, api, world, scopes, status):
        r = await add(api, world.key(world.owner().workspace, scopes))
        assert r.status == status
        if status == 403:
            assert r.code == "insufficient_scope"


class TestBulk:
    """POST /v1/domains/bulk."""

    @pytest.mark.gen_test
    async def test_partial_success(self, api, world):
        owner = world.owner()
        r = await api.post(
            "/v1/domains/bulk",
            {"apexList": ["a.example.com", "*.example.com", "B.example.com", "a.example.com."], "tags": ["batch"]},
            token=owner.token,
        )
        assert r.status == 200
        assert [d["apex"] for d in r.body["created"]] == ["a.example.com", "b.example.com"]
        assert all(d["tags"] == ["batch"] for d in r.body["created"])
        rejected = {x["apex"]: x["reason"] for x in r.body["rejected"]}
        assert "Wildcard" in rejected["*.example.com"]
        assert "Duplicate" in rejected["a.example.com."]

    @pytest.mark.gen_test
    async def test_existing_hostnames_come_back_unchanged(self, api, world):
        owner = world.owner()
        first = (await add(api, owner.token, "a.example.com", tags=["mine"])).body
        r = await api.post("/v1/domains/bulk", {"apexList": ["a.example.com"], "tags": ["batch"]}, token=owner.token)
        assert r.body["created"][0]["id"] == first["id"]
        assert r.body["created"][0]["tags"] == ["mine"]

    @pytest.mark.gen_test
    async def test_a_foreign_client_rejects_every_hostname_with_200(self, api, world):
        theirs = world.owner()
        client = (await api.post("/v1/clients", {"name": "Theirs"}, token=theirs.token)).body
        r = await api.post(
            "/v1/domains/bulk", {"apexList": ["a.example.com", "bad"], "clientId": client["id"]}, token=world.owner().token
        )
        assert r.status == 200 and r.body["created"] == []
        assert r.body["rejected"] == [
            {"apex": "a.example.com", "reason": "Client not found."},
            {"apex": "bad", "reason": "Client not found."},
        ]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("count", [0, 501])
    async def test_list_size_is_1_to_500(self, api, world, count):
        apexes = [f"h{n}.example.com" for n in range(count)]
        r = await api.post("/v1/domains/bulk", {"apexList": apexes}, token=world.owner().token)
        assert r.status == 400 and "apexList" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_500_hostnames_are_accepted(self, api, world):
        apexes = [f"h{n}.example.com" for n in range(500)]
        r = await api.post("/v1/domains/bulk", {"apexList": apexes}, token=world.owner().token)
        assert r.status == 200 and len(r.body["created"]) == 500

    @pytest.mark.gen_test
    async def test_a_non_string_entry_is_a_field_error(self, api, world):
        r = await api.post("/v1/domains/bulk", {"apexList": ["a.example.com", 3]}, token=world.owner().token)
        assert r.body["details"]["fieldErrors"]["apexList"] == ["[1]: Expected string, received number"]

    @pytest.mark.gen_test
    async def test_read_only_may_not(self, api, world):
        reader = world.member(world.owner().workspace, "read_only")
        r = await api.post("/v1/domains/bulk", {"apexList": ["a.example.com"]}, token=reader.token)
        assert r.code == "forbidden"


class TestItem:
    """GET, PATCH, DELETE /v1/domains/:id and the delegation record."""

    @pytest.mark.gen_test
    async def test_get(self, api, world):
        owner = world.owner()
        created = (await add(api, owner.token)).body
        r = await api.get(f"/v1/domains/{created['id']}", token=world.key(owner.workspace, READ))
        assert r.status == 200 and r.body == created

    @pytest.mark.gen_test
    async def test_a_key_polling_a_domain_sees_a_change_at_once(self, api, world):
        """The key, the domain and its JSON are kept between GETs (issue 49 item 3); a PATCH is seen."""
        owner = world.owner()
        created = (await add(api, owner.token)).body
        path, key = f"/v1/domains/{created['id']}", world.key(owner.workspace, READ)
        for _ in range(2):
            assert (await api.get(path, token=key)).body == created
        await api.patch(path, {"notes": "moved", "tags": ["eu"]}, token=owner.token)
        r = await api.get(path, token=key)
        assert (r.body["notes"], r.body["tags"]) == ("moved", ["eu"])

    @pytest.mark.gen_test
    async def test_a_polling_key_naming_another_workspace_is_not_found_and_its_own_is_served(self, api, world):
        owner, other = world.owner(), world.owner()
        created = (await add(api, owner.token)).body
        path, key = f"/v1/domains/{created['id']}", world.key(owner.workspace, READ)
        assert (await api.get(path, token=key)).status == 200  # the key is kept from here on
        r = await api.get(path, token=key, headers={"X-Workspace-Id": str(other.workspace.id)})
        assert (r.status, r.code) == (404, "not_found")
        r = await api.get(path, token=key, headers={"X-Workspace-Id": str(owner.workspace.id)})
        assert r.status == 200 and r.body == created

    @pytest.mark.gen_test
    async def test_another_workspaces_domain_is_not_found_for_every_method(self, api, world):
        theirs = (await add(api, world.owner().token)).body
        mine = world.owner()
        path = f"/v1/domains/{theirs['id']}"
        for r in [
            await api.get(path, token=mine.token),
            await api.patch(path, {"notes": "x"}, token=mine.token),
            await api.delete(path, token=mine.token),
            await api.get(path + "/delegation-record", token=mine.token),
            await api.post(path + "/verify-delegation", token=mine.token),
            await api.post(path + "/recheck", token=mine.token),
        ]:
            assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_a_malformed_id_is_not_found(self, api, world):
        r = await api.get("/v1/domains/12345", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    @pytest.mark.parametrize("spell", OTHER_SPELLINGS.values(), ids=OTHER_SPELLINGS.keys())
    async def test_an_id_in_another_spelling_than_the_documents_is_not_found(self, api, world, spell):
        """Issue 45, item 3: the pattern's lowercase hyphenated form only, as for an unknown id."""
        owner = world.owner()
        created = (await add(api, owner.token)).body
        path = f"/v1/domains/{quote(spell(created['id']), safe='')}"
        for r in (await api.get(path, token=owner.token), await api.patch(path, {"notes": "x"}, token=owner.token),
                  await api.get(path + "/delegation-record", token=owner.token)):
            assert (r.status, r.code, r.body.get("message")) == (404, "not_found", "Domain not found.")
        assert "notes" not in (await api.get(f"/v1/domains/{created['id']}", token=owner.token)).body

    @pytest.mark.gen_test
    async def test_patch_sets_and_clears_tags_and_notes(self, api, world, clock):
        owner = world.owner()
        created = (await add(api, owner.token)).body
        path = f"/v1/domains/{created['id']}"
        clock.advance(5)
        r = await api.patch(path, {"tags": ["a", "b"], "notes": "note"}, token=owner.token)
        assert (r.body["tags"], r.body["notes"]) == (["a", "b"], "note")
        assert r.body["updatedAt"] == "2026-11-22T10:00:05.000Z"
        r = await api.patch(path, {"notes": ""}, token=owner.token)
        assert "notes" not in r.body and r.body["tags"] == ["a", "b"]
        r = await api.patch(path, {"tags": []}, token=owner.token)
        assert r.body["tags"] == []

    @pytest.mark.gen_test
    async def test_patch_files_the_domain_under_a_client_and_under_none(self, api, world):
        owner = world.owner()
        created = (await add(api, owner.token)).body
        client = (await api.post("/v1/clients", {"name": "Customer A"}, token=owner.token)).body
        path = f"/v1/domains/{created['id']}"
        r = await api.patch(path, {"clientId": client["id"]}, token=owner.token)
        assert r.body["clientId"] == client["id"]
        assert "clientId" in (await api.patch(path, {"notes": "x"}, token=owner.token)).body  # kept when absent
        assert "clientId" not in (await api.patch(path, {"clientId": ""}, token=owner.token)).body

    @pytest.mark.gen_test
    async def test_patch_with_another_workspaces_client_is_not_found(self, api, world):
        owner, other = world.owner(), world.owner()
        created = (await add(api, owner.token)).body
        theirs = (await api.post("/v1/clients", {"name": "Theirs"}, token=other.token)).body
        r = await api.patch(f"/v1/domains/{created['id']}", {"clientId": theirs["id"]}, token=owner.token)
        assert (r.status, r.code, r.body["message"]) == (404, "not_found", "Client not found.")
        r = await api.patch(f"/v1/domains/{created['id']}", {"clientId": "not-a-uuid"}, token=owner.token)
        assert r.status == 400 and "clientId" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("spell", OTHER_SPELLINGS.values(), ids=OTHER_SPELLINGS.keys())
    async def test_patch_with_a_client_id_in_another_spelling_is_refused(self, api, world, spell):
        """Issue 45, item 3: the id of a client of the workspace, but not as the pattern writes it."""
        owner = world.owner()
        created = (await add(api, owner.token)).body
        client = (await api.post("/v1/clients", {"name": "Customer A"}, token=owner.token)).body
        r = await api.patch(f"/v1/domains/{created['id']}", {"clientId": spell(client["id"])}, token=owner.token)
        assert (r.status, r.code) == (400, "validation_error") and "clientId" in r.body["details"]["fieldErrors"]
        assert "clientId" not in (await api.get(f"/v1/domains/{created['id']}", token=owner.token)).body

    @pytest.mark.gen_test
    async def test_patch_validates(self, api, world):
        owner = world.owner()
        created = (await add(api, owner.token)).body
        r = await api.patch(f"/v1/domains/{created['id']}", {"notes": "x" * 2001, "tags": [""]}, token=owner.token)
        assert r.status == 400 and set(r.body["details"]["fieldErrors"]) == {"notes", "tags"}

    @pytest.mark.gen_test
    async def test_read_only_may_read_but_not_patch(self, api, world):
        owner = world.owner()
        created = (await add(api, owner.token)).body
        reader = world.member(owner.workspace, "read_only")
        assert (await api.get(f"/v1/domains/{created['id']}", token=reader.token)).status == 200
        r = await api.patch(f"/v1/domains/{created['id']}", {"notes": "x"}, token=reader.token)
        assert r.code == "forbidden"

    @pytest.mark.gen_test
    async def test_delete_removes_the_record(self, api, world):
        owner = world.owner()
        created = (await add(api, owner.token)).body
        assert (await api.delete(f"/v1/domains/{created['id']}", token=owner.token)).status == 204
        assert (await api.get(f"/v1/domains/{created['id']}", token=owner.token)).status == 404
        again = await add(api, owner.token)
        assert again.body["id"] != created["id"]

    @pytest.mark.gen_test
    async def test_a_read_key_may_not_delete(self, api, world):
        owner = world.owner()
        created = (await add(api, owner.token)).body
        r = await api.delete(f"/v1/domains/{created['id']}", token=world.key(owner.workspace, READ))
        assert r.code == "insufficient_scope"

    @pytest.mark.gen_test
    async def test_delegation_record_has_the_cname_on_top_and_the_txt_nested(self, api, world):
        owner = world.owner()
        created = (await add(api, owner.token)).body
        r = await api.get(f"/v1/domains/{created['id']}/delegation-record", token=world.key(owner.workspace, READ))
        assert r.body == {**created["validation"]["delegation"], "ownership": created["validation"]["ownership"]}
