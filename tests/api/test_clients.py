"""/v1/clients: the client records domains refer to."""

from __future__ import annotations

import pytest


async def make(api, token, name="Customer A", **fields):
    return await api.post("/v1/clients", {"name": name, **fields}, token=token)


class TestClients:
    """Create, list, read, update, delete."""

    @pytest.mark.gen_test
    async def test_create_and_read(self, api, world):
        owner = world.owner()
        r = await make(api, owner.token, notes="since 2024")
        assert r.status == 201
        assert set(r.body) == {"id", "name", "notes", "createdAt", "updatedAt"}
        got = await api.get(f"/v1/clients/{r.body['id']}", token=owner.token)
        assert got.body == r.body

    @pytest.mark.gen_test
    async def test_list_is_sorted_by_name(self, api, world):
        owner = world.owner()
        for name in ["beta", "Alpha", "gamma"]:
            await make(api, owner.token, name)
        r = await api.get("/v1/clients", token=owner.token)
        assert [c["name"] for c in r.body] == ["Alpha", "beta", "gamma"]

    @pytest.mark.gen_test
    async def test_patch_renames_and_clears_notes(self, api, world, clock):
        owner = world.owner()
        client = (await make(api, owner.token, notes="x")).body
        clock.advance(1)
        r = await api.patch(f"/v1/clients/{client['id']}", {"name": "Renamed", "notes": ""}, token=owner.token)
        assert r.body["name"] == "Renamed" and "notes" not in r.body
        assert r.body["updatedAt"] > client["updatedAt"]

    @pytest.mark.gen_test
    async def test_a_patch_with_an_empty_name_is_refused(self, api, world):
        owner = world.owner()
        client = (await make(api, owner.token)).body
        r = await api.patch(f"/v1/clients/{client['id']}", {"name": "  "}, token=owner.token)
        assert (r.status, r.code) == (400, "validation_error") and "name" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_name_is_required_and_bounded(self, api, world):
        owner = world.owner()
        assert (await api.post("/v1/clients", {}, token=owner.token)).body["details"]["fieldErrors"] == {"name": ["Required"]}
        assert (await make(api, owner.token, "  ")).status == 400
        assert (await make(api, owner.token, "x" * 201)).status == 400

    @pytest.mark.gen_test
    async def test_delete(self, api, world):
        owner = world.owner()
        client = (await make(api, owner.token)).body
        assert (await api.delete(f"/v1/clients/{client['id']}", token=owner.token)).status == 204
        assert (await api.get(f"/v1/clients/{client['id']}", token=owner.token)).status == 404

    @pytest.mark.gen_test
    async def test_a_client_with_domains_cannot_be_deleted(self, api, world):
        owner = world.owner()
        client = (await make(api, owner.token)).body
        domain = (await api.post("/v1/domains", {"apex": "a.example.com", "clientId": client["id"]}, token=owner.token)).body
        r = await api.delete(f"/v1/clients/{client['id']}", token=owner.token)
        assert (r.status, r.code) == (409, "client_in_use")
        await api.delete(f"/v1/domains/{domain['id']}", token=owner.token)
        assert (await api.delete(f"/v1/clients/{client['id']}", token=owner.token)).status == 204


class TestAccess:
    """Isolation, scopes and roles."""

    @pytest.mark.gen_test
    async def test_another_workspaces_client_is_not_found(self, api, world):
        client = (await make(api, world.owner().token)).body
        mine = world.owner()
        path = f"/v1/clients/{client['id']}"
        for r in [await api.get(path, token=mine.token), await api.patch(path, {"name": "x"}, token=mine.token),
                  await api.delete(path, token=mine.token)]:
            assert (r.status, r.code) == (404, "not_found")
        assert (await api.get("/v1/clients", token=mine.token)).body == []

    @pytest.mark.gen_test
    async def test_read_only_reads_but_does_not_write(self, api, world):
        owner = world.owner()
        await make(api, owner.token)
        reader = world.member(owner.workspace, "read_only")
        assert len((await api.get("/v1/clients", token=reader.token)).body) == 1
        assert (await make(api, reader.token)).code == "forbidden"

    @pytest.mark.gen_test
    async def test_keys_need_domains_read_to_read_and_domains_write_to_write(self, api, world):
        owner = world.owner()
        reader = world.key(owner.workspace, ["domains:read"])
        writer = world.key(owner.workspace, ["domains:write"])
        assert (await api.get("/v1/clients", token=reader)).status == 200
        assert (await api.get("/v1/clients", token=writer)).code == "insufficient_scope"
        assert (await make(api, writer)).status == 201
        assert (await make(api, reader)).code == "insufficient_scope"
