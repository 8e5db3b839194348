"""The team page: members and their roles for everyone; inviting, changing roles, removing
members and revoking invitations for owners and admins, through the core the API uses, with the
core's refusals in words."""

from __future__ import annotations

import re

import attrs
import pytest

from core.config import RateLimitsConfig
from core.identity import team
from core.identity.auth import Principal
from tests.pages.portal_client import Browser, sign_in

TEAM = "/team"
INVITE = "/team/invitations"


def invite(services, owner, email: str, role: str = "operator"):
    principal = Principal(workspace=owner.workspace, user=owner.user, role="owner")
    return team.invite(services, principal=principal, request=team.Invite(email=email, role=role))


def role_of(services, actor) -> str | None:
    member = services.store.team.member(actor.workspace.id, actor.user.id)
    return member.role if member else None


@pytest.mark.gen_test
async def test_members_are_listed_with_their_roles_in_words(browser, services, world):
    owner = world.owner("boss@example.com")
    world.member(owner.workspace, "read_only", "reader@example.com")
    sign_in(browser, services, owner)
    page = (await browser.get(TEAM)).body.decode()
    row = re.search(r'<td class="lead">reader@example.com</td>\s*<td data-label="Role">(.*?)</td>', page)
    assert row is not None and row.group(1) == "read-only" and "read_only</td>" not in page


@pytest.mark.gen_test
async def test_an_invitation_form_sent_twice_makes_one_invitation(browser, services, world):
    owner = world.owner()
    sign_in(browser, services, owner)
    form = {**await browser.form_on(TEAM, INVITE), "email": "new@example.com", "role": "operator"}
    first, second = await browser.post(INVITE, form), await browser.post(INVITE, form)
    assert (first.code, second.code) == (303, 303)
    assert [i.email for i in services.store.team.invitations(owner.workspace.id)] == ["new@example.com"]


@pytest.mark.gen_test
async def test_the_invited_person_finds_the_invitation_on_their_account_page(browser, http_client, base_url, services, world):
    owner = world.owner(name="Acme Corp")
    sign_in(browser, services, owner)
    await browser.submit(TEAM, INVITE, {"email": "guest@example.com", "role": "admin"})
    guest = Browser(http_client, base_url)
    sign_in(guest, services, attrs.evolve(owner, token=world.session_token("guest@example.com")))  # in no workspace
    page = (await guest.get("/account")).body.decode()
    assert "<strong>Acme Corp</strong> invites you as <strong>admin</strong>" in page


@pytest.mark.gen_test
async def test_an_invalid_e_mail_is_refused_in_words_with_the_form_kept(browser, services, world):
    owner = world.owner()
    sign_in(browser, services, owner)
    r = await browser.submit(TEAM, INVITE, {"email": "not an address", "role": "operator"})
    assert (r.code, r.headers["Location"]) == (303, TEAM)
    page = (await browser.follow(r)).body.decode()
    assert "Must be an e-mail address" in page and 'value="not an address"' in page
    assert '<option value="operator" selected>' in page
    assert services.store.team.invitations(owner.workspace.id) == []


@pytest.mark.gen_test
async def test_revoking_an_invitation(browser, services, world):
    owner = world.owner()
    invitation = invite(services, owner, "guest@example.com")
    sign_in(browser, services, owner)
    r = await browser.submit(TEAM, f"/team/invitations/{invitation.id}/revoke")
    page = (await browser.follow(r)).body.decode()
    assert "The invitation for guest@example.com was revoked." in page
    assert services.store.team.invitations(owner.workspace.id) == []


@pytest.mark.gen_test
async def test_changing_a_members_role(browser, services, world):
    owner = world.owner()
    member = world.member(owner.workspace, "read_only", "reader@example.com")
    sign_in(browser, services, owner)
    r = await browser.submit(TEAM, f"/team/members/{member.user.id}/role", {"role": "operator"})
    page = (await browser.follow(r)).body.decode()
    assert "reader@example.com is now operator." in page and role_of(services, member) == "operator"


@pytest.mark.gen_test
async def test_each_role_select_is_named_after_its_member(browser, services, world):
    owner = world.owner()
    world.member(owner.workspace, "operator", "op@example.com")
    sign_in(browser, services, owner)
    page = (await browser.get(TEAM)).body.decode()
    assert 'aria-label="New role for op@example.com"' in page


@pytest.mark.gen_test
async def test_the_last_owner_cannot_be_demoted_and_is_told_why(browser, services, world):
    owner = world.owner()
    sign_in(browser, services, owner)
    r = await browser.submit(TEAM, f"/team/members/{owner.user.id}/role", {"role": "admin"})
    assert (r.code, r.headers["Location"]) == (303, TEAM)
    page = (await browser.follow(r)).body.decode()
    assert "last owner cannot be removed, demoted or leave; make another owner first" in page
    assert role_of(services, owner) == "owner"


@pytest.mark.gen_test
async def test_an_admin_is_told_only_an_owner_can_make_owners(browser, services, world):
    owner = world.owner()
    admin = world.member(owner.workspace, "admin")
    member = world.member(owner.workspace, "operator")
    sign_in(browser, services, admin)
    r = await browser.submit(TEAM, f"/team/members/{member.user.id}/role", {"role": "owner"})
    page = (await browser.follow(r)).body.decode()
    assert "Only an owner can grant, change or remove the owner role." in page
    assert role_of(services, member) == "operator"


@pytest.mark.gen_test
async def test_a_revocation_sent_twice_answers_both_times_as_the_first(browser, services, world):
    owner = world.owner()
    invitation = invite(services, owner, "guest@example.com")
    sign_in(browser, services, owner)
    action = f"/team/invitations/{invitation.id}/revoke"
    form = await browser.form_on(TEAM, action)
    answers = [await browser.post(action, form) for _ in range(2)]
    assert [(r.code, r.headers["Location"]) for r in answers] == [(303, TEAM)] * 2


@pytest.mark.gen_test
async def test_a_removal_sent_twice_answers_both_times_as_the_first(browser, services, world):
    owner = world.owner()
    member = world.member(owner.workspace, "operator", "op@example.com")
    sign_in(browser, services, owner)
    remove = f"/team/members/{member.user.id}/remove"
    form = await browser.form_on(remove, remove)
    answers = [await browser.post(remove, form) for _ in range(2)]
    assert [(r.code, r.headers["Location"]) for r in answers] == [(303, TEAM)] * 2


@pytest.mark.gen_test
async def test_removing_a_member_asks_for_a_confirmation_naming_their_e_mail(browser, services, world):
    owner = world.owner()
    member = world.member(owner.workspace, "operator", "op@example.com")
    sign_in(browser, services, owner)
    remove = f"/team/members/{member.user.id}/remove"
    team_page = (await browser.get(TEAM)).body.decode()
    assert f'href="{remove}"' in team_page and f'action="{remove}"' not in team_page
    confirmation = (await browser.get(remove)).body.decode()
    assert "Remove op@example.com?" in confirmation and role_of(services, member) == "operator"
    r = await browser.submit(remove, remove)
    assert "op@example.com was removed from the team." in (await browser.follow(r)).body.decode()
    assert role_of(services, member) is None


@pytest.mark.gen_test
async def test_a_removal_not_sent_from_the_confirmation_removes_nobody(browser, services, world):
    owner = world.owner()
    member = world.member(owner.workspace, "operator")
    sign_in(browser, services, owner)
    remove = f"/team/members/{member.user.id}/remove"
    r = await browser.post(remove, await browser.form_on(TEAM, f"/team/members/{member.user.id}/role"))
    assert (r.code, r.headers["Location"]) == (303, remove) and role_of(services, member) == "operator"


@pytest.mark.gen_test
@pytest.mark.parametrize("role", ["operator", "read_only"])
async def test_a_member_who_may_not_list_the_team_in_the_api_may_not_open_the_page(browser, services, world, role):
    owner = world.owner("boss@example.com")
    sign_in(browser, services, world.member(owner.workspace, role))
    r = await browser.get(TEAM)
    assert r.code == 403 and "boss@example.com" not in r.body.decode()


@pytest.mark.gen_test
async def test_a_read_only_members_post_is_a_403_page(browser, services, world):
    owner = world.owner()
    reader = world.member(owner.workspace, "read_only")
    sign_in(browser, services, reader)
    form = await browser.form_on("/account", "/logout")  # a form of theirs with a good intent token
    r = await browser.post(f"/team/members/{owner.user.id}/role", {**form, "role": "read_only"})
    assert r.code == 403 and "<h1>403 Forbidden</h1>" in r.body.decode() and role_of(services, owner) == "owner"


@pytest.mark.gen_test
async def test_another_workspaces_member_is_a_404_page(browser, services, world):
    mine, theirs = world.owner(), world.owner()
    stranger = world.member(theirs.workspace, "operator")
    sign_in(browser, services, mine)
    form = await browser.form_on(TEAM, INVITE)
    r = await browser.post(f"/team/members/{stranger.user.id}/role", {**form, "role": "read_only"})
    assert r.code == 404 and "<h1>404 Not Found</h1>" in r.body.decode() and role_of(services, stranger) == "operator"
    assert (await browser.get(f"/team/members/{stranger.user.id}/remove")).code == 404


@pytest.mark.gen_test
async def test_another_workspaces_invitation_is_a_404_page(browser, services, world):
    mine, theirs = world.owner(), world.owner()
    invitation = invite(services, theirs, "guest@example.com")
    sign_in(browser, services, mine)
    form = await browser.form_on(TEAM, INVITE)
    r = await browser.post(f"/team/invitations/{invitation.id}/revoke", form)
    assert r.code == 404 and len(services.store.team.invitations(theirs.workspace.id)) == 1


@pytest.mark.gen_test
async def test_a_removed_members_next_page_no_longer_shows_that_workspace(browser, http_client, base_url, services, world,
                                                                        clock):
    acme = world.owner(name="Acme")
    member = world.member(acme.workspace, "operator", "both@example.com")  # joined first: shown by default
    clock.advance(1)
    world.owner("both@example.com", name="Home")
    member_browser = Browser(http_client, base_url)
    sign_in(member_browser, services, member)
    assert "Showing workspace <strong>Acme</strong>" in (await member_browser.get("/account")).body.decode()
    sign_in(browser, services, acme)
    remove = f"/team/members/{member.user.id}/remove"
    await browser.submit(remove, remove)
    page = (await member_browser.get("/account")).body.decode()
    assert "Showing workspace <strong>Home</strong>" in page and "Acme" not in page


class TestRateLimit:
    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, rate_limits=RateLimitsConfig(api=1))

    @pytest.mark.gen_test
    async def test_team_actions_count_in_the_apis_bucket(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        form = await browser.form_on(TEAM, INVITE)
        await api.get("/v1/team", token=owner.token)  # the one request this window allows
        r = await browser.post(INVITE, {**form, "email": "new@example.com", "role": "operator"})
        assert r.code == 429 and services.store.team.invitations(owner.workspace.id) == []
