"""Session bearers (OIDC ID tokens) and the /v1/auth/session and /v1/auth/logout endpoints."""

from __future__ import annotations

import base64
import json

import attrs
import pytest

from core.config import OidcConfig
from tests.helpers import OTHER_SPELLINGS
from tests.servers.oidc import new_key


async def session(api, token):
    return await api.get("/v1/auth/session", token=token)


class TestSessionEndpoint:
    """GET /v1/auth/session."""

    @pytest.mark.gen_test
    async def test_no_token_gives_json_null(self, api):
        r = await api.get("/v1/auth/session")
        assert (r.status, r.body) == (200, None)

    @pytest.mark.gen_test
    async def test_a_workspace_header_that_is_not_a_uuid_is_404_without_a_token_too(self, api, world):
        """Checked the same way with or without credentials (issue 37, item 12)."""
        for token in (None, world.owner().token):
            r = await api.get("/v1/auth/session", token=token, headers={"X-Workspace-Id": "abc"})
            assert (r.status, r.code, r.body["message"]) == (404, "not_found", "Workspace not found."), token

    @pytest.mark.gen_test
    @pytest.mark.parametrize("spell", OTHER_SPELLINGS.values(), ids=OTHER_SPELLINGS.keys())
    async def test_ones_own_workspace_in_another_spelling_is_404_with_or_without_a_token(self, api, world, spell):
        """Issue 45, item 3: malformed as the header's pattern has it, so answered as "abc" is."""
        owner = world.owner()
        for token in (None, owner.token, world.key(owner.workspace, ["*"])):
            r = await api.get("/v1/auth/session", token=token, headers={"X-Workspace-Id": spell(str(owner.workspace.id))})
            assert (r.status, r.code, r.body["message"]) == (404, "not_found", "Workspace not found."), token

    @pytest.mark.gen_test
    async def test_a_workspace_uuid_without_a_token_still_gives_json_null(self, api):
        r = await api.get("/v1/auth/session", headers={"X-Workspace-Id": "0b9f3a44-6f4e-4c1e-9d55-1f6f0a3f8e21"})
        assert (r.status, r.body) == (200, None)

    @pytest.mark.gen_test
    async def test_a_member_sees_email_and_workspace(self, api, world):
        owner = world.owner("Owner@Example.com", name="Acme Hosting")
        r = await session(api, owner.token)
        assert r.status == 200
        assert r.body == {
            "userEmail": "owner@example.com",
            "org": {"id": str(owner.workspace.id), "name": "Acme Hosting", "createdAt": "2026-11-22T10:00:00.000Z"},
        }

    @pytest.mark.gen_test
    async def test_a_read_only_member_sees_the_session(self, api, world):
        reader = world.member(world.owner().workspace, "read_only")
        assert (await session(api, reader.token)).status == 200

    @pytest.mark.gen_test
    @pytest.mark.parametrize("scopes", [["domains:read"], ["*"]])
    async def test_a_key_with_domains_read_or_star_sees_the_workspace(self, api, world, scopes):
        owner = world.owner()
        r = await session(api, world.key(owner.workspace, scopes))
        assert r.status == 200
        assert r.body["org"]["id"] == str(owner.workspace.id)
        assert r.body["userEmail"] == owner.user.email

    @pytest.mark.gen_test
    async def test_a_key_without_domains_read_lacks_scope(self, api, world):
        r = await session(api, world.key(world.owner().workspace, ["certificates:read", "domains:write"]))
        assert (r.status, r.code) == (403, "insufficient_scope")

    @pytest.mark.gen_test
    async def test_a_non_bearer_authorization_is_401(self, api):
        r = await api.get("/v1/auth/session", headers={"Authorization": "Basic dXNlcjpwYXNz"})
        assert (r.status, r.code) == (401, "unauthorized")

    @pytest.mark.gen_test
    async def test_garbage_bearer_is_an_invalid_token(self, api):
        r = await session(api, "not-a-jwt")
        assert (r.status, r.code) == (401, "invalid_token")


class TestIdTokenVerification:
    """Every check an ID token must pass to be a session."""

    @pytest.mark.gen_test
    async def test_bad_signature(self, api, world, oidc_issuer):
        owner = world.owner()
        impostor = new_key(oidc_issuer.signing_key.kid)  # same kid, other key material
        r = await session(api, world.session_token(owner.user.email, key=impostor))
        assert (r.status, r.code) == (401, "invalid_token")
        assert "signature" in r.body["message"]

    @pytest.mark.gen_test
    async def test_wrong_audience(self, api, world):
        owner = world.owner()
        r = await session(api, world.session_token(owner.user.email, aud="another-client"))
        assert (r.status, r.code) == (401, "invalid_token")
        assert "audience" in r.body["message"]

    @pytest.mark.gen_test
    async def test_several_audiences_need_us_as_authorized_party(self, api, world):
        owner = world.owner()
        token = world.session_token(owner.user.email, aud=["test-client", "other"])
        assert (await session(api, token)).status == 401
        token = world.session_token(owner.user.email, aud=["test-client", "other"], azp="test-client")
        assert (await session(api, token)).status == 200

    @pytest.mark.gen_test
    async def test_wrong_issuer(self, api, world):
        owner = world.owner()
        r = await session(api, world.session_token(owner.user.email, iss="https://evil.example"))
        assert (r.status, r.code) == (401, "invalid_token")

    @pytest.mark.gen_test
    async def test_expired(self, api, world, clock):
        owner = world.owner()
        token = owner.token
        clock.advance(3600 + 61)
        r = await session(api, token)
        assert (r.status, r.code) == (401, "invalid_token")
        assert "expired" in r.body["message"]

    @pytest.mark.gen_test
    async def test_issued_in_the_future(self, api, world, clock):
        owner = world.owner()
        iat = int(clock.now().timestamp()) + 600
        r = await session(api, world.session_token(owner.user.email, iat=iat, exp=iat + 3600))
        assert (r.status, r.code) == (401, "invalid_token")

    @pytest.mark.gen_test
    async def test_unverified_email(self, api, world):
        owner = world.owner()
        r = await session(api, world.session_token(owner.user.email, email_verified=False))
        assert (r.status, r.code) == (401, "invalid_token")
        assert "verified" in r.body["message"]

    @pytest.mark.gen_test
    async def test_missing_email(self, api, world):
        owner = world.owner()
        token = world.session_token(owner.user.email, without=("email",))
        assert (await session(api, token)).status == 401

    @pytest.mark.gen_test
    async def test_an_access_token_is_not_a_session(self, api, world):
        owner = world.owner()
        token = world.session_token(owner.user.email, header={"typ": "at+jwt"})
        r = await session(api, token)
        assert (r.status, r.code) == (401, "invalid_token")
        assert "access token is not a session token" in r.body["message"]

    @pytest.mark.gen_test
    async def test_an_access_token_typed_bearer_in_its_payload_is_not_a_session(self, api, world):
        owner = world.owner()
        r = await session(api, world.session_token(owner.user.email, typ="Bearer"))  # as Keycloak types them
        assert (r.status, r.code) == (401, "invalid_token")
        assert "access token is not a session token" in r.body["message"]

    @pytest.mark.gen_test
    async def test_an_access_token_with_token_use_access_is_not_a_session(self, api, world):
        owner = world.owner()
        r = await session(api, world.session_token(owner.user.email, token_use="access"))  # as Cognito marks them
        assert (r.status, r.code) == (401, "invalid_token")
        assert "access token is not a session token" in r.body["message"]

    @pytest.mark.gen_test
    async def test_an_id_token_typed_id_in_its_payload_is_a_session(self, api, world):
        owner = world.owner()
        assert (await session(api, world.session_token(owner.user.email, typ="ID"))).status == 200  # Keycloak

    @pytest.mark.gen_test
    async def test_an_id_token_with_token_use_id_is_a_session(self, api, world):
        owner = world.owner()
        assert (await session(api, world.session_token(owner.user.email, token_use="id"))).status == 200  # Cognito

    @pytest.mark.gen_test
    async def test_alg_none_is_refused(self, api, world):
        owner = world.owner()
        header = '{"alg":"none","typ":"JWT"}'

        def b64(data: str) -> str:
            return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")

        claims = json.dumps({"iss": world.issuer.issuer, "aud": "test-client", "sub": "x", "email": owner.user.email})
        r = await session(api, f"{b64(header)}.{b64(claims)}.")
        assert (r.status, r.code) == (401, "invalid_token")

    @pytest.mark.gen_test
    async def test_unknown_kid_triggers_one_jwks_refetch(self, api, world, oidc_issuer):
        owner = world.owner()
        assert (await session(api, owner.token)).status == 200
        fetches = oidc_issuer.jwks_fetches
        rotated = oidc_issuer.rotate()
        token = world.session_token(owner.user.email, key=rotated)
        assert (await session(api, token)).status == 200
        assert oidc_issuer.jwks_fetches == fetches + 1

    @pytest.mark.gen_test
    async def test_a_kid_the_issuer_never_published_is_refused(self, api, world):
        owner = world.owner()
        r = await session(api, world.session_token(owner.user.email, key=new_key("never-published")))
        assert (r.status, r.code) == (401, "invalid_token")

    @pytest.mark.gen_test
    async def test_keys_are_cached_between_requests(self, api, world, oidc_issuer):
        owner = world.owner()
        await session(api, owner.token)
        fetches = oidc_issuer.jwks_fetches
        for _ in range(3):
            assert (await session(api, owner.token)).status == 200
        assert oidc_issuer.jwks_fetches == fetches

    @pytest.mark.gen_test
    async def test_a_user_without_workspace_is_forbidden(self, api, world):
        r = await session(api, world.session_token("stranger@example.com"))
        assert (r.status, r.code) == (403, "forbidden")
        assert "sign up" in r.body["message"]

    @pytest.mark.gen_test
    async def test_first_sign_in_binds_the_subject(self, api, world, services):
        owner = world.owner()
        assert (await session(api, owner.token)).status == 200
        bound = services.store.accounts.user_by_email(owner.user.email)
        assert (bound.issuer, bound.subject) == (world.issuer.issuer, f"sub-{owner.user.email}")
        # Another identity claiming the same e-mail later is not this user.
        r = await session(api, world.session_token(owner.user.email, subject="someone-else"))
        assert (r.status, r.code) == (403, "forbidden")


class TestIdentityProviderDown:
    """Sessions when the issuer cannot be reached."""

    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, oidc=OidcConfig(issuer="http://127.0.0.1:9", client_id="test-client"))

    @pytest.mark.gen_test
    async def test_an_unreachable_issuer_is_a_502(self, api, world):
        owner = world.owner()
        r = await session(api, owner.token)
        assert (r.status, r.code) == (502, "upstream_error")

    @pytest.mark.gen_test
    async def test_api_keys_still_work(self, api, world):
        r = await session(api, world.key(world.owner().workspace, ["*"]))
        assert r.status == 200


class TestLogout:
    """POST /v1/auth/logout."""

    @pytest.mark.gen_test
    async def test_logout_is_204_and_revokes_nothing(self, api, world):
        owner = world.owner()
        key = world.key(owner.workspace, ["*"])
        assert (await api.post("/v1/auth/logout", token=owner.token)).status == 204
        assert (await api.post("/v1/auth/logout")).status == 204
        assert (await session(api, owner.token)).status == 200
        assert (await session(api, key)).status == 200
