"""POST /v1/public/signup: passwordless sign-up."""

from __future__ import annotations

import re

import attrs
import pytest

from core.config import RateLimitsConfig
from tests.helpers import UNPRINTABLE_EMAILS


async def signup(api, email="new@example.com", domain="shop.example.com", **extra):
    return await api.post("/v1/public/signup", {"email": email, "domain": domain, **extra})


class TestNewEmail:
    """201 for an e-mail address the service does not know."""

    @pytest.mark.gen_test
    async def test_creates_a_workspace_an_owner_and_the_domain(self, api, world, services):
        r = await signup(api, "New@Example.com", "Shop.Example.com")
        assert r.status == 201
        assert r.body["userEmail"] == "new@example.com"
        domain = r.body["domain"]
        assert domain["apex"] == "shop.example.com" and domain["validation"]["status"] == "pending"
        assert r.body["portalUrl"] == f"http://127.0.0.1:8080/site/{domain['id']}/dns"
        assert r.body["authProvider"] == {"type": "oidc", "passwordless": True, "loginUrl": "http://127.0.0.1:8080/login"}
        # The owner proves the address at the first sign-in, and is then the workspace's owner.
        token = world.session_token("new@example.com")
        session = await api.get("/v1/auth/session", token=token)
        assert session.body["org"]["id"] == domain["orgId"]
        got = await api.get(f"/v1/domains/{domain['id']}", token=token)
        assert got.body == domain

    @pytest.mark.gen_test
    async def test_the_domain_follows_the_same_rules_as_post_domains(self, api):
        r = await signup(api, domain="*.example.com")
        assert (r.status, r.code) == (400, "validation_error")
        assert "Wildcard" in r.body["details"]["fieldErrors"]["domain"][0]


class TestKnownEmail:
    """202 and nothing created for a known address."""

    @pytest.mark.gen_test
    async def test_a_known_email_must_sign_in(self, api, world, services):
        owner = world.owner("known@example.com")
        r = await signup(api, "KNOWN@example.com", "other.example.com")
        assert r.status == 202
        assert r.body["status"] == "sign_in_required" and r.body["userEmail"] == "known@example.com"
        assert r.body["portalUrl"].endswith("/login") and r.body["message"]
        assert r.body["authProvider"]["passwordless"] is True
        domains = await api.post("/v1/domains/query", {}, token=owner.token)
        assert domains.body["total"] == 0

    @pytest.mark.gen_test
    async def test_signing_up_twice_creates_one_workspace(self, api, services):
        assert (await signup(api)).status == 201
        assert (await signup(api, domain="second.example.com")).status == 202
        assert len(services.store.accounts.workspaces_with_owners()) == 1

    @pytest.mark.gen_test
    async def test_a_pending_invitation_does_not_block_sign_up(self, api, world):
        inviter = world.owner()
        await api.post("/v1/team/invitations", {"email": "invited@example.com", "role": "operator"}, token=inviter.token)
        r = await signup(api, "invited@example.com", "mine.example.com")
        assert r.status == 201
        session = (await api.get("/v1/auth/session", token=world.session_token("invited@example.com"))).body
        assert session["org"]["id"] == r.body["domain"]["orgId"] != str(inviter.workspace.id)
        team = (await api.get("/v1/team", token=inviter.token)).body
        assert [i["email"] for i in team["invitations"]] == ["invited@example.com"]  # still only an offer
        assert "invited@example.com" not in [m["email"] for m in team["members"]]

    @pytest.mark.gen_test
    async def test_someone_who_left_every_workspace_may_sign_up_again(self, api, world):
        owner = world.owner()
        member = world.member(owner.workspace, "operator", "leaver@example.com")
        assert (await api.post(f"/v1/workspaces/{owner.workspace.id}/leave", token=member.token)).status == 204
        assert (await signup(api, "leaver@example.com", "again.example.com")).status == 201


class TestRefusals:
    """400 with field errors."""

    @pytest.mark.gen_test
    async def test_a_password_is_refused_by_name(self, api):
        r = await signup(api, password="hunter2")
        assert (r.status, r.code) == (400, "validation_error")
        assert "passwordless" in r.body["details"]["fieldErrors"]["password"][0]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("email", ["", "no-at-sign", "a@b", "two@@example.com"])
    async def test_an_invalid_email(self, api, email):
        r = await signup(api, email)
        assert r.status == 400 and "email" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("email", UNPRINTABLE_EMAILS)
    async def test_an_email_with_a_control_format_or_space_character_makes_no_account(self, api, services, email):
        r = await signup(api, email)
        assert (r.status, r.code) == (400, "validation_error") and "email" in r.body["details"]["fieldErrors"]
        assert services.store.accounts.workspaces_with_owners() == []

    @pytest.mark.gen_test
    async def test_missing_fields(self, api):
        r = await api.post("/v1/public/signup", {})
        assert r.body["details"]["fieldErrors"] == {"email": ["Required"], "domain": ["Required"]}


class TestRateLimit:
    """Sign-up has its own bucket, apart from the shared one."""

    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, rate_limits=RateLimitsConfig(signup=2, api=100))

    @pytest.mark.gen_test
    async def test_the_signup_bucket(self, api):
        for n in range(2):
            r = await signup(api, f"u{n}@example.com", f"s{n}.example.com")
            assert re.match(r'"signup";r=\d+;t=\d+', r.headers["RateLimit"])
        r = await signup(api, "u9@example.com", "s9.example.com")
        assert (r.status, r.code) == (429, "rate_limited")
        assert r.headers["RateLimit-Policy"] == '"signup";q=2;w=900'
        assert (await api.get("/v1/auth/session")).status == 200  # the shared bucket is untouched
