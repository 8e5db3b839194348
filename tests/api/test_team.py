"""/v1/team: members, roles and invitations."""

from __future__ import annotations

import pytest

from tests.helpers import UNPRINTABLE_EMAILS


async def invite(api, actor, email, role="operator"):
    return await api.post("/v1/team/invitations", {"email": email, "role": role}, token=actor.token)


class TestTeam:
    """Listing."""

    @pytest.mark.gen_test
    async def test_members_and_invitations(self, api, world):
        owner = world.owner("boss@example.com")
        admin = world.member(owner.workspace, "admin", "admin@example.com")
        await invite(api, owner, "New@Example.com", "read_only")
        r = await api.get("/v1/team", token=admin.token)
        assert sorted((m["email"], m["role"]) for m in r.body["members"]) == [
            ("admin@example.com", "admin"), ("boss@example.com", "owner")
        ]
        assert [(i["email"], i["role"]) for i in r.body["invitations"]] == [("new@example.com", "read_only")]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("role", ["operator", "read_only"])
    async def test_other_roles_are_forbidden(self, api, world, role):
        member = world.member(world.owner().workspace, role)
        assert (await api.get("/v1/team", token=member.token)).code == "forbidden"

    @pytest.mark.gen_test
    async def test_a_star_key_is_forbidden(self, api, world):
        owner = world.owner()
        r = await api.get("/v1/team", token=world.key(owner.workspace, ["*"]))
        assert (r.status, r.code) == (403, "forbidden")


class TestInvitations:
    """Invite (an offer the invitee accepts or declines: tests/api/test_workspaces.py), revoke."""

    @pytest.mark.gen_test
    async def test_an_invitation_is_only_an_offer_until_accepted(self, api, world):
        owner = world.owner()
        r = await invite(api, owner, "op@example.com", "operator")
        assert r.status == 201 and r.body["role"] == "operator"
        token = world.session_token("op@example.com")
        assert (await api.get("/v1/auth/session", token=token)).code == "forbidden"  # no workspace yet
        team = (await api.get("/v1/team", token=owner.token)).body
        assert "op@example.com" not in [m["email"] for m in team["members"]]

    @pytest.mark.gen_test
    async def test_an_accepted_invitation_gives_its_role_at_once(self, api, world):
        owner = world.owner()
        invitation = (await invite(api, owner, "op@example.com", "operator")).body
        token = world.session_token("op@example.com")
        assert (await api.post(f"/v1/invitations/{invitation['id']}/accept", token=token)).status == 200
        assert (await api.get("/v1/auth/session", token=token)).body["org"]["id"] == str(owner.workspace.id)
        team = (await api.get("/v1/team", token=owner.token)).body
        assert ("op@example.com", "operator") in [(m["email"], m["role"]) for m in team["members"]]
        assert team["invitations"] == []
        # An operator may add domains but not manage keys.
        assert (await api.post("/v1/domains", {"apex": "a.example.com"}, token=token)).status == 201
        assert (await api.post("/v1/api-keys", {"name": "x"}, token=token)).code == "forbidden"

    @pytest.mark.gen_test
    async def test_inviting_a_member_is_a_conflict(self, api, world):
        owner = world.owner()
        r = await invite(api, owner, owner.user.email)
        assert (r.status, r.code) == (409, "already_member")

    @pytest.mark.gen_test
    async def test_inviting_twice_is_a_conflict(self, api, world):
        owner = world.owner()
        await invite(api, owner, "x@example.com")
        assert (await invite(api, owner, "X@example.com")).code == "already_invited"

    @pytest.mark.gen_test
    async def test_bad_role_and_email(self, api, world):
        r = await api.post("/v1/team/invitations", {"email": "nope", "role": "superuser"}, token=world.owner().token)
        assert r.status == 400

    @pytest.mark.gen_test
    @pytest.mark.parametrize("email", UNPRINTABLE_EMAILS)
    async def test_an_email_with_a_control_format_or_space_character_is_not_invited(self, api, world, email):
        owner = world.owner()
        r = await invite(api, owner, email)
        assert (r.status, r.code) == (400, "validation_error") and "email" in r.body["details"]["fieldErrors"]
        assert (await api.get("/v1/team", token=owner.token)).body["invitations"] == []

    @pytest.mark.gen_test
    async def test_only_an_owner_invites_an_owner(self, api, world):
        owner = world.owner()
        admin = world.member(owner.workspace, "admin")
        assert (await invite(api, admin, "o2@example.com", "owner")).code == "forbidden"
        assert (await invite(api, owner, "o2@example.com", "owner")).status == 201

    @pytest.mark.gen_test
    async def test_revoke(self, api, world):
        owner = world.owner()
        invitation = (await invite(api, owner, "x@example.com")).body
        assert (await api.delete(f"/v1/team/invitations/{invitation['id']}", token=owner.token)).status == 204
        assert (await api.get("/v1/auth/session", token=world.session_token("x@example.com"))).code == "forbidden"

    @pytest.mark.gen_test
    async def test_another_workspaces_invitation_is_not_found(self, api, world):
        theirs = (await invite(api, world.owner(), "x@example.com")).body
        r = await api.delete(f"/v1/team/invitations/{theirs['id']}", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")


class TestRoles:
    """Changing roles and removing members."""

    @pytest.mark.gen_test
    async def test_owner_changes_a_role(self, api, world):
        owner = world.owner()
        member = world.member(owner.workspace, "operator")
        r = await api.patch(f"/v1/team/members/{member.user.id}", {"role": "admin"}, token=owner.token)
        assert (r.status, r.body["role"]) == (200, "admin")
        assert (await api.get("/v1/team", token=member.token)).status == 200  # admins may now manage the team

    @pytest.mark.gen_test
    async def test_an_unknown_role_is_refused(self, api, world):
        owner = world.owner()
        member = world.member(owner.workspace, "operator")
        r = await api.patch(f"/v1/team/members/{member.user.id}", {"role": "superuser"}, token=owner.token)
        assert (r.status, r.code) == (400, "validation_error") and "role" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_an_admin_may_not_grant_owner(self, api, world):
        owner = world.owner()
        admin = world.member(owner.workspace, "admin")
        member = world.member(owner.workspace, "operator")
        r = await api.patch(f"/v1/team/members/{member.user.id}", {"role": "owner"}, token=admin.token)
        assert (r.status, r.code) == (403, "forbidden")

    @pytest.mark.gen_test
    async def test_an_admin_may_not_demote_or_remove_an_owner(self, api, world):
        owner = world.owner()
        admin = world.member(owner.workspace, "admin")
        world.member(owner.workspace, "owner")
        path = f"/v1/team/members/{owner.user.id}"
        assert (await api.patch(path, {"role": "operator"}, token=admin.token)).code == "forbidden"
        assert (await api.delete(path, token=admin.token)).code == "forbidden"

    @pytest.mark.gen_test
    async def test_the_last_owner_cannot_be_demoted_or_removed(self, api, world):
        owner = world.owner()
        path = f"/v1/team/members/{owner.user.id}"
        r = await api.patch(path, {"role": "admin"}, token=owner.token)
        assert (r.status, r.code) == (409, "last_owner")
        assert (await api.delete(path, token=owner.token)).code == "last_owner"

    @pytest.mark.gen_test
    async def test_with_two_owners_one_may_step_down(self, api, world):
        owner = world.owner()
        second = world.member(owner.workspace, "owner")
        r = await api.patch(f"/v1/team/members/{owner.user.id}", {"role": "admin"}, token=second.token)
        assert r.body["role"] == "admin"

    @pytest.mark.gen_test
    async def test_remove_a_member(self, api, world):
        owner = world.owner()
        member = world.member(owner.workspace, "operator")
        assert (await api.delete(f"/v1/team/members/{member.user.id}", token=owner.token)).status == 204
        assert (await api.get("/v1/auth/session", token=member.token)).code == "forbidden"

    @pytest.mark.gen_test
    async def test_another_workspaces_member_is_not_found(self, api, world):
        stranger = world.owner()
        r = await api.patch(f"/v1/team/members/{stranger.user.id}", {"role": "admin"}, token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")
