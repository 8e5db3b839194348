"""A person's side of membership: invitations accepted or declined, several workspaces, leaving."""

from __future__ import annotations

import pytest

WORKSPACE = "X-Workspace-Id"


async def invite(api, actor, email, role="operator"):
    r = await api.post("/v1/team/invitations", {"email": email, "role": role}, token=actor.token)
    assert r.status == 201
    return r.body


async def session_org(api, token, workspace=None):
    headers = {WORKSPACE: str(workspace)} if workspace else None
    return await api.get("/v1/auth/session", token=token, headers=headers)


class TestInvitations:
    @pytest.mark.gen_test
    async def test_the_invitee_sees_who_invites_them_where_and_as_what(self, api, world):
        owner = world.owner("boss@example.com", name="Acme Corp")
        await invite(api, owner, "Guest@Example.com", "admin")
        r = await api.get("/v1/invitations", token=world.session_token("guest@example.com"))
        [offer] = r.body["invitations"]
        assert (offer["org"]["name"], offer["role"], offer["invitedBy"]) == ("Acme Corp", "admin", "boss@example.com")
        assert "ownershipToken" not in offer["org"]

    @pytest.mark.gen_test
    async def test_accepting_joins_the_workspace_with_the_invited_role(self, api, world):
        owner = world.owner()
        offer = await invite(api, owner, "guest@example.com", "admin")
        token = world.session_token("guest@example.com")
        r = await api.post(f"/v1/invitations/{offer['id']}/accept", token=token)
        assert (r.status, r.body["org"]["id"], r.body["role"], r.body["default"]) == (200, str(owner.workspace.id), "admin", True)
        assert (await api.get("/v1/invitations", token=token)).body["invitations"] == []

    @pytest.mark.gen_test
    async def test_declining_removes_the_offer_and_joins_nothing(self, api, world):
        owner = world.owner()
        offer = await invite(api, owner, "guest@example.com")
        token = world.session_token("guest@example.com")
        assert (await api.post(f"/v1/invitations/{offer['id']}/decline", token=token)).status == 204
        assert (await api.get("/v1/invitations", token=token)).body["invitations"] == []
        assert (await api.get("/v1/team", token=owner.token)).body["invitations"] == []
        assert (await session_org(api, token)).code == "forbidden"

    @pytest.mark.gen_test
    async def test_someone_elses_invitation_is_not_found(self, api, world):
        owner = world.owner()
        offer = await invite(api, owner, "guest@example.com")
        other = world.owner()
        for action in ("accept", "decline"):
            r = await api.post(f"/v1/invitations/{offer['id']}/{action}", token=other.token)
            assert (r.status, r.code) == (404, "not_found")
        assert len((await api.get("/v1/team", token=owner.token)).body["invitations"]) == 1

    @pytest.mark.gen_test
    async def test_an_existing_member_of_another_workspace_joins_only_by_accepting(self, api, world):
        first, second = world.owner(), world.owner()
        offer = await invite(api, second, first.user.email, "admin")
        assert (await session_org(api, first.token)).body["org"]["id"] == str(first.workspace.id)
        members = (await api.get("/v1/team", token=second.token)).body["members"]
        assert first.user.email not in [m["email"] for m in members]
        joined = (await api.post(f"/v1/invitations/{offer['id']}/accept", token=first.token)).body
        assert joined["default"] is False  # the first workspace stays the default

    @pytest.mark.gen_test
    async def test_an_api_key_has_no_invitations(self, api, world):
        owner = world.owner()
        r = await api.get("/v1/invitations", token=world.key(owner.workspace, ["*"]))
        assert (r.status, r.code) == (403, "forbidden")

    @pytest.mark.gen_test
    async def test_without_credentials_it_is_401(self, api):
        assert (await api.get("/v1/invitations")).status == 401


class TestSeveralWorkspaces:
    @pytest.fixture
    def two(self, world):
        """Someone who owns one workspace and operates in another they joined later."""
        mine = world.owner("both@example.com", name="Mine")
        theirs = world.owner(name="Theirs")
        world.member(theirs.workspace, "operator", "both@example.com")
        return mine, theirs

    @pytest.mark.gen_test
    async def test_a_request_acts_in_the_workspace_joined_first_by_default(self, api, two):
        mine, _ = two
        assert (await session_org(api, mine.token)).body["org"]["name"] == "Mine"

    @pytest.mark.gen_test
    async def test_the_header_picks_another_workspace_and_its_role(self, api, two):
        mine, theirs = two
        r = await api.post("/v1/domains", {"apex": "shop.example.com"}, token=mine.token,
                           headers={WORKSPACE: str(theirs.workspace.id)})
        assert r.body["orgId"] == str(theirs.workspace.id)
        keys = await api.post("/v1/api-keys", {"name": "x"}, token=mine.token, headers={WORKSPACE: str(theirs.workspace.id)})
        assert keys.code == "forbidden"  # an operator there, though an owner at home

    @pytest.mark.gen_test
    async def test_a_workspace_one_does_not_belong_to_is_not_found(self, api, world, two):
        mine, _ = two
        stranger = world.owner()
        for value in (str(stranger.workspace.id), "not-a-uuid"):
            r = await session_org(api, mine.token, value)
            assert (r.status, r.code, r.body["message"]) == (404, "not_found", "Workspace not found.")

    @pytest.mark.gen_test
    async def test_an_api_key_acts_only_in_its_own_workspace(self, api, world, two):
        mine, theirs = two
        key = world.key(mine.workspace, ["*"])
        assert (await session_org(api, key, mine.workspace.id)).status == 200
        assert (await session_org(api, key, theirs.workspace.id)).code == "not_found"

    @pytest.mark.gen_test
    async def test_the_list_shows_each_workspace_with_its_role_and_the_default(self, api, two):
        mine, _ = two
        listed = (await api.get("/v1/workspaces", token=mine.token)).body["workspaces"]
        assert [(w["org"]["name"], w["role"], w["default"]) for w in listed] == [
            ("Mine", "owner", True), ("Theirs", "operator", False)
        ]


class TestLeaving:
    @pytest.mark.gen_test
    async def test_a_member_leaves_and_the_workspace_is_then_not_found(self, api, world):
        owner = world.owner()
        member = world.member(owner.workspace, "admin")
        assert (await api.post(f"/v1/workspaces/{owner.workspace.id}/leave", token=member.token)).status == 204
        assert (await session_org(api, member.token, owner.workspace.id)).code == "not_found"
        members = (await api.get("/v1/team", token=owner.token)).body["members"]
        assert member.user.email not in [m["email"] for m in members]

    @pytest.mark.gen_test
    async def test_the_last_owner_cannot_leave(self, api, world):
        owner = world.owner()
        r = await api.post(f"/v1/workspaces/{owner.workspace.id}/leave", token=owner.token)
        assert (r.status, r.code) == (409, "last_owner")

    @pytest.mark.gen_test
    async def test_one_of_two_owners_may_leave(self, api, world):
        owner = world.owner()
        other = world.member(owner.workspace, "owner")
        assert (await api.post(f"/v1/workspaces/{owner.workspace.id}/leave", token=other.token)).status == 204

    @pytest.mark.gen_test
    async def test_leaving_a_workspace_one_is_not_in_is_not_found(self, api, world):
        owner, stranger = world.owner(), world.owner()
        r = await api.post(f"/v1/workspaces/{owner.workspace.id}/leave", token=stranger.token)
        assert (r.status, r.code) == (404, "not_found")
