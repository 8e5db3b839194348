"""/v1/api-keys: create, list, rotate, revoke, expiry, and who may do each."""

from __future__ import annotations

import pytest

from core.identity.api_keys import LAST_USED_RESOLUTION

ALL_SCOPES = ["domains:read", "domains:write", "certificates:read", "certificates:write"]


async def create(api, token, **body):
    body.setdefault("name", "deploy bot")
    return await api.post("/v1/api-keys", body, token=token)


class TestCreate:
    """POST /v1/api-keys."""

    @pytest.mark.gen_test
    async def test_owner_gets_201_with_the_secret_once(self, api, world):
        owner = world.owner()
        r = await create(api, owner.token, scopes=["domains:read", "domains:write"])
        assert r.status == 201
        assert r.body["secret"].startswith("ac_live_")
        assert r.body["secret"].startswith(r.body["prefix"])
        assert r.body["scopes"] == ["domains:read", "domains:write"]
        assert r.body["status"] == "active"
        listed = await api.get("/v1/api-keys", token=owner.token)
        assert [k["id"] for k in listed.body] == [r.body["id"]]
        assert "secret" not in listed.body[0]

    @pytest.mark.gen_test
    async def test_admin_may_create(self, api, world):
        admin = world.member(world.owner().workspace, "admin")
        assert (await create(api, admin.token)).status == 201

    @pytest.mark.gen_test
    @pytest.mark.parametrize("role", ["operator", "read_only"])
    async def test_other_roles_are_forbidden(self, api, world, role):
        member = world.member(world.owner().workspace, role)
        r = await create(api, member.token)
        assert (r.status, r.code) == (403, "forbidden")

    @pytest.mark.gen_test
    async def test_a_star_key_is_forbidden(self, api, world):
        owner = world.owner()
        r = await create(api, world.key(owner.workspace, ["*"]))
        assert (r.status, r.code) == (403, "forbidden")

    @pytest.mark.gen_test
    async def test_no_bearer_is_401_unauthorized(self, api):
        r = await api.post("/v1/api-keys", {"name": "x"})
        assert (r.status, r.code) == (401, "unauthorized")
        assert r.headers["WWW-Authenticate"].startswith("Bearer")

    @pytest.mark.gen_test
    async def test_unknown_scope_is_named(self, api, world):
        r = await create(api, world.owner().token, scopes=["domains:read", "domains:admin"])
        assert (r.status, r.code) == (400, "validation_error")
        assert "domains:admin" in r.body["details"]["fieldErrors"]["scopes"][0]

    @pytest.mark.gen_test
    async def test_missing_name_is_a_field_error(self, api, world):
        r = await api.post("/v1/api-keys", {"scopes": []}, token=world.owner().token)
        assert r.status == 400
        assert r.body["details"]["fieldErrors"] == {"name": ["Required"]}

    @pytest.mark.gen_test
    async def test_wrong_types_are_field_errors(self, api, world):
        r = await api.post("/v1/api-keys", {"name": 5, "scopes": "domains:read"}, token=world.owner().token)
        assert r.status == 400
        errors = r.body["details"]["fieldErrors"]
        assert errors["name"] == ["Expected string, received number"]
        assert errors["scopes"] == ["Expected array, received string"]

    @pytest.mark.gen_test
    async def test_expiry_in_the_past_is_refused(self, api, world):
        r = await create(api, world.owner().token, expiresAt="2020-01-01T00:00:00Z")
        assert r.status == 400
        assert r.body["details"]["fieldErrors"]["expiresAt"] == ["Must be in the future"]

    @pytest.mark.gen_test
    async def test_expiry_without_offset_is_refused(self, api, world):
        r = await create(api, world.owner().token, expiresAt="2030-01-01T00:00:00")
        assert r.status == 400
        assert "expiresAt" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_the_secret_is_stored_only_as_a_hash(self, api, world, services):
        r = await create(api, world.owner().token)
        dump = everything_stored(services.store)
        assert r.body["secret"] not in dump
        assert r.body["prefix"] in dump


def everything_stored(store) -> str:
    """Every row of every table, as text, on either backend."""
    if store.pg is None:
        return "\n".join(store.db.conn.iterdump())
    tables = [row[0] for row in store.sql.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()]
    return "\n".join(str(row) for table in tables for row in store.sql.execute(f"SELECT * FROM {table}").fetchall())


class TestList:
    """GET /v1/api-keys."""

    @pytest.mark.gen_test
    async def test_a_star_key_may_list(self, api, world):
        owner = world.owner()
        r = await api.get("/v1/api-keys", token=world.key(owner.workspace, ["*"]))
        assert r.status == 200 and len(r.body) == 1

    @pytest.mark.gen_test
    async def test_a_key_with_every_other_scope_lacks_scope(self, api, world):
        owner = world.owner()
        r = await api.get("/v1/api-keys", token=world.key(owner.workspace, ALL_SCOPES))
        assert (r.status, r.code) == (403, "insufficient_scope")

    @pytest.mark.gen_test
    async def test_operator_may_list(self, api, world):
        operator = world.member(world.owner().workspace, "operator")
        assert (await api.get("/v1/api-keys", token=operator.token)).status == 200

    @pytest.mark.gen_test
    async def test_read_only_may_not_list(self, api, world):
        reader = world.member(world.owner().workspace, "read_only")
        r = await api.get("/v1/api-keys", token=reader.token)
        assert (r.status, r.code) == (403, "forbidden")

    @pytest.mark.gen_test
    async def test_only_own_workspace_keys_are_listed(self, api, world):
        mine, theirs = world.owner(), world.owner()
        world.key(theirs.workspace, ["*"], name="theirs")
        r = await api.get("/v1/api-keys", token=mine.token)
        assert r.body == []


class TestUse:
    """Authenticating with a key."""

    @pytest.mark.gen_test
    async def test_empty_scopes_authenticate_but_reach_nothing(self, api, world):
        token = world.key(world.owner().workspace, [])
        r = await api.get("/v1/auth/session", token=token)
        assert (r.status, r.code) == (403, "insufficient_scope")

    @pytest.mark.gen_test
    async def test_a_made_up_key_is_invalid(self, api):
        r = await api.get("/v1/auth/session", token="ac_live_" + "A" * 38)
        assert (r.status, r.code) == (401, "invalid_api_key")

    @pytest.mark.gen_test
    async def test_a_key_with_one_character_changed_is_invalid(self, api, world):
        token = world.key(world.owner().workspace, ["*"])
        tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
        r = await api.get("/v1/auth/session", token=tampered)
        assert (r.status, r.code) == (401, "invalid_api_key")

    @pytest.mark.gen_test
    async def test_last_used_is_recorded_at_most_once_a_minute(self, api, world, clock):
        owner = world.owner()
        token = world.key(owner.workspace, ["*"])
        first = clock.now()
        await api.get("/v1/auth/session", token=token)
        clock.advance(10)
        keys = (await api.get("/v1/api-keys", token=token)).body
        assert keys[0]["lastUsedAt"] == "2026-11-22T10:00:00.000Z" == first.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        clock.advance(LAST_USED_RESOLUTION.total_seconds())
        keys = (await api.get("/v1/api-keys", token=token)).body
        assert keys[0]["lastUsedAt"] == "2026-11-22T10:01:10.000Z"


class TestExpiry:
    """expiresAt."""

    @pytest.mark.gen_test
    async def test_an_expired_key_fails_and_reads_expired(self, api, world, clock):
        owner = world.owner()
        r = await create(api, owner.token, scopes=["*"], expiresAt="2026-11-22T11:00:00Z")
        assert r.body["expiresAt"] == "2026-11-22T11:00:00.000Z"
        assert (await api.get("/v1/auth/session", token=r.body["secret"])).status == 200
        clock.advance(3600)
        denied = await api.get("/v1/auth/session", token=r.body["secret"])
        assert (denied.status, denied.code) == (401, "invalid_api_key")
        listed = await api.get("/v1/api-keys", token=owner.token)
        assert listed.body[0]["status"] == "expired"


class TestRotate:
    """POST /v1/api-keys/:id/rotate."""

    @pytest.mark.gen_test
    async def test_new_secret_works_and_old_stops_at_once(self, api, world):
        owner = world.owner()
        created = (await create(api, owner.token, scopes=["*"], expiresAt="2027-01-01T00:00:00Z")).body
        r = await api.post(f"/v1/api-keys/{created['id']}/rotate", token=owner.token)
        assert r.status == 200
        assert r.body["secret"] != created["secret"]
        assert r.body["scopes"] == ["*"] and r.body["expiresAt"] == created["expiresAt"]
        assert r.body["status"] == "active" and r.body["id"] == created["id"]
        old = await api.get("/v1/auth/session", token=created["secret"])
        assert (old.status, old.code) == (401, "invalid_api_key")
        assert (await api.get("/v1/auth/session", token=r.body["secret"])).status == 200

    @pytest.mark.gen_test
    async def test_a_secret_in_use_stops_at_once_when_rotated(self, api, world):
        owner = world.owner()
        created = (await create(api, owner.token, scopes=["*"])).body
        assert (await api.get("/v1/auth/session", token=created["secret"])).status == 200
        await api.post(f"/v1/api-keys/{created['id']}/rotate", token=owner.token)
        assert (await api.get("/v1/auth/session", token=created["secret"])).status == 401

    @pytest.mark.gen_test
    async def test_a_revoked_key_stays_revoked(self, api, world):
        owner = world.owner()
        created = (await create(api, owner.token, scopes=["*"])).body
        await api.post(f"/v1/api-keys/{created['id']}/revoke", token=owner.token)
        r = await api.post(f"/v1/api-keys/{created['id']}/rotate", token=owner.token)
        assert r.status == 200 and r.body["status"] == "revoked"
        denied = await api.get("/v1/auth/session", token=r.body["secret"])
        assert (denied.status, denied.code) == (401, "invalid_api_key")

    @pytest.mark.gen_test
    async def test_an_expired_key_stays_expired(self, api, world, clock):
        owner = world.owner()
        created = (await create(api, owner.token, scopes=["*"], expiresAt="2026-11-22T10:30:00Z")).body
        clock.advance(3600)
        r = await api.post(f"/v1/api-keys/{created['id']}/rotate", token=owner.token)
        assert r.body["status"] == "expired"
        assert (await api.get("/v1/auth/session", token=r.body["secret"])).status == 401

    @pytest.mark.gen_test
    async def test_another_workspaces_key_is_not_found(self, api, world):
        mine, theirs = world.owner(), world.owner()
        their_key = (await create(api, theirs.token)).body
        r = await api.post(f"/v1/api-keys/{their_key['id']}/rotate", token=mine.token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_a_malformed_id_is_not_found(self, api, world):
        r = await api.post("/v1/api-keys/not-a-uuid/rotate", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_a_star_key_may_not_rotate(self, api, world):
        owner = world.owner()
        created = (await create(api, owner.token)).body
        r = await api.post(f"/v1/api-keys/{created['id']}/rotate", token=world.key(owner.workspace, ["*"]))
        assert (r.status, r.code) == (403, "forbidden")

    @pytest.mark.gen_test
    async def test_an_operator_may_not_rotate(self, api, world):
        owner = world.owner()
        created = (await create(api, owner.token)).body
        operator = world.member(owner.workspace, "operator")
        r = await api.post(f"/v1/api-keys/{created['id']}/rotate", token=operator.token)
        assert (r.status, r.code) == (403, "forbidden")


class TestRevoke:
    """POST /v1/api-keys/:id/revoke."""

    @pytest.mark.gen_test
    async def test_revoked_key_fails_authentication(self, api, world):
        owner = world.owner()
        created = (await create(api, owner.token, scopes=["*"])).body
        r = await api.post(f"/v1/api-keys/{created['id']}/revoke", token=owner.token)
        assert r.status == 204
        denied = await api.get("/v1/auth/session", token=created["secret"])
        assert (denied.status, denied.code) == (401, "invalid_api_key")
        listed = await api.get("/v1/api-keys", token=owner.token)
        assert listed.body[0]["status"] == "revoked"

    @pytest.mark.gen_test
    async def test_a_key_in_use_stops_at_once_when_revoked(self, api, world):
        owner = world.owner()
        created = (await create(api, owner.token, scopes=["*"])).body
        assert (await api.get("/v1/auth/session", token=created["secret"])).status == 200
        await api.post(f"/v1/api-keys/{created['id']}/revoke", token=owner.token)
        assert (await api.get("/v1/auth/session", token=created["secret"])).status == 401

    @pytest.mark.gen_test
    async def test_revoking_twice_is_still_204(self, api, world):
        owner = world.owner()
        created = (await create(api, owner.token)).body
        for _ in range(2):
            assert (await api.post(f"/v1/api-keys/{created['id']}/revoke", token=owner.token)).status == 204

    @pytest.mark.gen_test
    async def test_another_workspaces_key_is_not_found(self, api, world):
        mine, theirs = world.owner(), world.owner()
        their_key = (await create(api, theirs.token)).body
        r = await api.post(f"/v1/api-keys/{their_key['id']}/revoke", token=mine.token)
        assert (r.status, r.code) == (404, "not_found")
        assert (await api.get("/v1/auth/session", token=their_key["secret"])).status == 403  # untouched

    @pytest.mark.gen_test
    async def test_a_key_may_not_revoke_itself(self, api, world):
        owner = world.owner()
        created = (await create(api, owner.token, scopes=["*"])).body
        r = await api.post(f"/v1/api-keys/{created['id']}/revoke", token=created["secret"])
        assert (r.status, r.code) == (403, "forbidden")
