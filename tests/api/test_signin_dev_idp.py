"""Sign-in through the built-in development identity provider, browserless, end to end."""

from __future__ import annotations

import hashlib
import json
from urllib.parse import parse_qs, urlsplit

import attrs
import pytest
from tornado.httpclient import HTTPRequest

from core.config import Config, ConfigError, OidcConfig, RateLimitsConfig, ServerConfig, config_from_dict
from core.identity.dev_idp import CODE_SECONDS, DEFAULT_CLIENT_ID, MAX_CODES, DevIdentityProvider, TokenError
from store import Store
from tests.helpers import UNPRINTABLE_EMAILS
from tests.servers.oidc import new_key
from tests.servers.pkce import authorize_params, code_from, new_flow, query


@pytest.fixture
def config(config, http_port):
    here = f"http://127.0.0.1:{http_port}"
    return attrs.evolve(config, oidc=OidcConfig(), server=ServerConfig(base_url=here, portal_url=here))


async def sign_in(http_client, services, email):
    """The browser's part: the provider's e-mail form, then the redirect back with a code."""
    flow = new_flow()
    params = authorize_params(flow, client_id=DEFAULT_CLIENT_ID, redirect_uri=services.oidc_client.redirect_uri)
    base = services.config.server.base_url
    form = await http_client.fetch(f"{base}/idp/authorize?{query(params)}")
    assert b"Development only" in form.body
    response = await http_client.fetch(
        HTTPRequest(f"{base}/idp/authorize", method="POST", body=query({**params, "email": email}), follow_redirects=False),
        raise_error=False,
    )
    assert response.code == 302, response.body
    return code_from(response.headers["Location"]), flow


async def exchange(api, code, flow, **overrides):
    body = {"code": code, "codeVerifier": flow["verifier"], "nonce": flow["nonce"], **overrides}
    return await api.post("/v1/auth/oidc/exchange", body)


class TestExchange:
    """POST /v1/auth/oidc/exchange against the built-in provider."""

    @pytest.mark.gen_test
    async def test_a_signed_up_owner_gets_a_session(self, api, http_client, services):
        signed_up = await api.post("/v1/public/signup", {"email": "Owner@Example.com", "domain": "shop.example.com"})
        code, flow = await sign_in(http_client, services, "owner@example.com")
        r = await exchange(api, code, flow)
        assert r.status == 200
        assert (r.body["tokenType"], r.body["email"], r.body["expiresInSeconds"]) == ("Bearer", "owner@example.com", 3600)
        session = await api.get("/v1/auth/session", token=r.body["token"])
        assert session.body["org"]["id"] == signed_up.body["domain"]["orgId"]
        key = await api.post("/v1/api-keys", {"name": "bot", "scopes": ["*"]}, token=r.body["token"])
        assert key.status == 201

    @pytest.mark.gen_test
    async def test_the_access_token_is_not_a_bearer(self, api, http_client, services):
        await api.post("/v1/public/signup", {"email": "a@example.com", "domain": "a.example.com"})
        code, flow = await sign_in(http_client, services, "a@example.com")
        access = (await exchange(api, code, flow)).body["accessToken"]
        r = await api.get("/v1/auth/session", token=access)
        assert (r.status, r.code) == (401, "invalid_token")

    @pytest.mark.gen_test
    @pytest.mark.parametrize("verifier", ["short", "x" * 129, "has spaces in it" * 4, "ünïcode" * 8])
    async def test_a_malformed_verifier_is_a_validation_error(self, api, verifier):
        r = await api.post("/v1/auth/oidc/exchange", {"code": "c", "codeVerifier": verifier})
        assert (r.status, r.code) == (400, "validation_error")
        assert "codeVerifier" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_a_wrong_verifier_is_an_invalid_grant(self, api, http_client, services):
        code, _ = await sign_in(http_client, services, "a@example.com")
        r = await exchange(api, code, new_flow())
        assert (r.status, r.code) == (400, "invalid_grant")
        assert "PKCE" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_code_works_once(self, api, http_client, services):
        await api.post("/v1/public/signup", {"email": "a@example.com", "domain": "a.example.com"})
        code, flow = await sign_in(http_client, services, "a@example.com")
        assert (await exchange(api, code, flow)).status == 200
        again = await exchange(api, code, flow)
        assert (again.status, again.code) == (400, "invalid_grant")

    @pytest.mark.gen_test
    async def test_a_wrong_nonce_is_refused(self, api, http_client, services):
        await api.post("/v1/public/signup", {"email": "a@example.com", "domain": "a.example.com"})
        code, flow = await sign_in(http_client, services, "a@example.com")
        r = await exchange(api, code, flow, nonce="another-nonce")
        assert (r.status, r.code) == (401, "invalid_token")
        assert "nonce" in r.body["message"]

    @pytest.mark.gen_test
    async def test_an_email_without_workspace_or_invitation_is_forbidden(self, api, http_client, services):
        code, flow = await sign_in(http_client, services, "stranger@example.com")
        r = await exchange(api, code, flow)
        assert (r.status, r.code) == (403, "forbidden")
        assert "sign up" in r.body["message"] and "invite" in r.body["message"]

    @pytest.mark.gen_test
    async def test_someone_only_invited_signs_in_to_answer_the_invitation(self, api, http_client, services):
        signed_up = await api.post("/v1/public/signup", {"email": "owner@example.com", "domain": "shop.example.com"})
        owner = await exchange(api, *await sign_in(http_client, services, "owner@example.com"))
        invited = await api.post("/v1/team/invitations", {"email": "guest@example.com", "role": "admin"}, token=owner.body["token"])
        assert invited.status == 201
        r = await exchange(api, *await sign_in(http_client, services, "guest@example.com"))
        assert r.status == 200
        invitations = (await api.get("/v1/invitations", token=r.body["token"])).body["invitations"]
        assert [(i["org"]["id"], i["role"]) for i in invitations] == [(signed_up.body["domain"]["orgId"], "admin")]


class TestProviderPages:
    """The provider's own endpoints."""

    @pytest.mark.gen_test
    async def test_discovery_names_its_endpoints(self, http_client, services):
        base = services.config.server.base_url
        doc = json.loads((await http_client.fetch(f"{base}/idp/.well-known/openid-configuration")).body)
        assert doc["issuer"] == f"{base}/idp"
        assert doc["code_challenge_methods_supported"] == ["S256"]
        keys = json.loads((await http_client.fetch(doc["jwks_uri"])).body)["keys"]
        assert keys and "d" not in keys[0]  # never the private part

    @pytest.mark.gen_test
    async def test_authorize_refuses_requests_without_pkce(self, http_client, services):
        params = authorize_params(new_flow(), client_id=DEFAULT_CLIENT_ID, redirect_uri=services.oidc_client.redirect_uri)
        del params["code_challenge"]
        r = await http_client.fetch(f"{services.config.server.base_url}/idp/authorize?{query(params)}", raise_error=False)
        assert r.code == 400 and b"PKCE is required" in r.body

    @pytest.mark.gen_test
    async def test_authorize_never_redirects_elsewhere(self, http_client, services):
        params = authorize_params(new_flow(), client_id=DEFAULT_CLIENT_ID, redirect_uri="https://evil.example/cb")
        r = await http_client.fetch(f"{services.config.server.base_url}/idp/authorize?{query(params)}", raise_error=False)
        assert r.code == 400 and b"redirect_uri must be" in r.body

    @pytest.mark.gen_test
    async def test_the_form_wants_an_email_address(self, http_client, services):
        params = authorize_params(new_flow(), client_id=DEFAULT_CLIENT_ID, redirect_uri=services.oidc_client.redirect_uri)
        r = await http_client.fetch(
            HTTPRequest(f"{services.config.server.base_url}/idp/authorize", method="POST",
                        body=query({**params, "email": "not an address"}), follow_redirects=False),
            raise_error=False,
        )
        assert r.code == 400 and b"Enter an e-mail address." in r.body

    @pytest.mark.gen_test
    @pytest.mark.parametrize("email", UNPRINTABLE_EMAILS)
    async def test_the_form_wants_an_address_without_control_format_or_space_characters(self, http_client, services,
                                                                                        email):
        params = authorize_params(new_flow(), client_id=DEFAULT_CLIENT_ID, redirect_uri=services.oidc_client.redirect_uri)
        r = await http_client.fetch(
            HTTPRequest(f"{services.config.server.base_url}/idp/authorize", method="POST",
                        body=query({**params, "email": email}), follow_redirects=False),
            raise_error=False,
        )
        assert r.code == 400 and b"Enter an e-mail address." in r.body

    @pytest.mark.gen_test
    async def test_the_token_endpoint_authenticates_the_client(self, http_client, services):
        r = await http_client.fetch(
            HTTPRequest(f"{services.config.server.base_url}/idp/token", method="POST",
                        body="grant_type=authorization_code&code=x&client_id=dev-portal&client_secret=wrong"),
            raise_error=False,
        )
        assert r.code == 401 and b"invalid_client" in r.body


class TestProviderHeaders:
    """The provider's pages carry the portal's protections: a sign-in form must never be framed
    (clickjacking), leak its query (the PKCE challenge, the state) in a Referer, or be sniffed."""

    @staticmethod
    def assert_protected(response, what: str) -> None:
        headers = response.headers
        assert headers["X-Frame-Options"] == "DENY", what
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"], what
        assert headers["Referrer-Policy"] == "no-referrer", what
        assert headers["X-Content-Type-Options"] == "nosniff", what
        assert len(headers["X-Request-Id"]) == 32, what

    @pytest.mark.gen_test
    async def test_the_sign_in_form_is_protected(self, http_client, services):
        params = authorize_params(new_flow(), client_id=DEFAULT_CLIENT_ID, redirect_uri=services.oidc_client.redirect_uri)
        r = await http_client.fetch(f"{services.config.server.base_url}/idp/authorize?{query(params)}")
        assert r.code == 200
        self.assert_protected(r, "form")

    @pytest.mark.gen_test
    async def test_a_refused_sign_in_request_is_protected_too(self, http_client, services):
        r = await http_client.fetch(f"{services.config.server.base_url}/idp/authorize?client_id=x", raise_error=False)
        assert r.code == 400
        self.assert_protected(r, "refusal")

    @pytest.mark.gen_test
    async def test_the_posted_form_and_the_token_endpoint_are_protected(self, http_client, services):
        base = services.config.server.base_url
        params = authorize_params(new_flow(), client_id=DEFAULT_CLIENT_ID, redirect_uri=services.oidc_client.redirect_uri)
        posted = await http_client.fetch(HTTPRequest(f"{base}/idp/authorize", method="POST", follow_redirects=False,
                                                     body=query({**params, "email": "a@example.com"})), raise_error=False)
        assert posted.code == 302
        self.assert_protected(posted, "redirect")
        token = await http_client.fetch(HTTPRequest(f"{base}/idp/token", method="POST", body="grant_type=x"),
                                        raise_error=False)
        self.assert_protected(token, "token")

    @pytest.mark.gen_test
    @pytest.mark.parametrize("path", ["/idp/.well-known/openid-configuration", "/idp/jwks", "/idp/nothing"])
    async def test_the_documents_and_an_unknown_path_are_protected(self, http_client, services, path):
        r = await http_client.fetch(services.config.server.base_url + path, raise_error=False)
        self.assert_protected(r, path)


class TestCodeStore:
    """The provider keeps issued codes in the database (every process redeems them), but not forever
    and not without bound."""

    @pytest.fixture
    def idp(self, clock, tmp_path, backend):
        store = Store(tmp_path / "service.sqlite3", url=backend or "")
        yield DevIdentityProvider(
            issuer="http://127.0.0.1:8080/idp", client_id=DEFAULT_CLIENT_ID, client_secret="s3cret",
            redirect_uri="http://127.0.0.1:8080/auth/callback", key=new_key("dev"), clock=clock,
            store=store, max_codes=5,
        )
        store.close()

    @staticmethod
    async def issue(idp, clock):
        clock.advance(1)  # issued one after the other
        flow = new_flow()
        params = authorize_params(flow, client_id=idp.client_id, redirect_uri=idp.redirect_uri)
        return code_from(await idp.issue_code(params, "a@example.com")), flow

    @staticmethod
    async def redeem(idp, code, flow):
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": idp.redirect_uri,
                "code_verifier": flow["verifier"], "client_id": idp.client_id, "client_secret": idp.client_secret}
        return await idp.token(form, None)

    @pytest.mark.gen_test
    async def test_expired_codes_are_dropped_when_a_new_one_is_issued(self, idp, clock):
        for _ in range(3):
            await self.issue(idp, clock)
        clock.advance(CODE_SECONDS + 1)
        await self.issue(idp, clock)
        assert await idp.pending_codes() == 1

    @pytest.mark.gen_test
    async def test_the_store_never_exceeds_its_cap(self, idp, clock):
        for _ in range(12):
            await self.issue(idp, clock)
            assert await idp.pending_codes() <= 5
        assert await idp.pending_codes() == 5

    @pytest.mark.gen_test
    async def test_a_full_store_drops_the_oldest_code_first(self, idp, clock):
        codes = [await self.issue(idp, clock) for _ in range(6)]
        with pytest.raises(TokenError, match="unknown, expired or already used"):
            await self.redeem(idp, *codes[0])
        assert "id_token" in await self.redeem(idp, *codes[1])
        assert "id_token" in await self.redeem(idp, *codes[-1])

    @pytest.mark.gen_test
    async def test_only_its_hash_is_kept(self, idp, clock):
        code, _ = await self.issue(idp, clock)
        kept = await idp.store.run(lambda: idp.store.sql.execute("SELECT code_hash FROM dev_idp_codes").fetchall())
        assert [row[0] for row in kept] == [hashlib.sha256(code.encode()).hexdigest()]

    def test_the_default_cap_is_ten_thousand_codes(self):
        assert MAX_CODES == 10_000


class TestRateLimit:
    """The provider's endpoints count in the shared api bucket (a sign-in itself counts once in
    auth, at the callback: the provider's form and its server-to-server token call do not)."""

    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, rate_limits=RateLimitsConfig(api=3))

    @pytest.mark.gen_test
    async def test_a_flood_of_sign_in_forms_is_cut_off_with_429(self, http_client, services):
        params = authorize_params(new_flow(), client_id=DEFAULT_CLIENT_ID, redirect_uri=services.oidc_client.redirect_uri)
        request = HTTPRequest(f"{services.config.server.base_url}/idp/authorize", method="POST",
                              body=query({**params, "email": "a@example.com"}), follow_redirects=False)
        codes = [(await http_client.fetch(request, raise_error=False)).code for _ in range(4)]
        assert codes == [302, 302, 302, 429]

    @pytest.mark.gen_test
    async def test_a_flood_of_token_requests_is_cut_off_with_429(self, http_client, services):
        request = HTTPRequest(f"{services.config.server.base_url}/idp/token", method="POST",
                              body="grant_type=authorization_code&code=x&client_id=dev-portal&client_secret=wrong")
        codes = [(await http_client.fetch(request, raise_error=False)).code for _ in range(4)]
        assert codes == [401, 401, 401, 429]


class TestPortalSignIn:
    """GET /login and /auth/callback: the browser flow the portal offers."""

    @pytest.mark.gen_test
    async def test_login_round_trip_keeps_the_session_and_lands_on_a_clean_url(self, api, http_client, services):
        await api.post("/v1/public/signup", {"email": "a@example.com", "domain": "a.example.com"})
        base = services.config.server.base_url
        start = await http_client.fetch(HTTPRequest(f"{base}/login", follow_redirects=False), raise_error=False)
        assert start.code == 302
        cookie = start.headers["Set-Cookie"].split(";")[0]
        location = start.headers["Location"]
        assert location.startswith(f"{base}/idp/authorize?") and "code_challenge_method=S256" in location
        params = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        back = await http_client.fetch(
            HTTPRequest(f"{base}/idp/authorize", method="POST", body=query({**params, "email": "a@example.com"}),
                        follow_redirects=False),
            raise_error=False,
        )
        done = await http_client.fetch(
            back.headers["Location"], headers={"Cookie": cookie}, follow_redirects=False, raise_error=False
        )
        assert (done.code, done.headers["Location"]) == (302, "/domains")
        session = [c.split(";")[0] for c in done.headers.get_list("Set-Cookie") if c.startswith("cps_session=")]
        account = await http_client.fetch(f"{base}/account", headers={"Cookie": session[0]}, raise_error=False)
        assert account.code == 200 and b"a@example.com" in account.body

    @pytest.mark.gen_test
    async def test_a_callback_without_the_login_cookie_is_refused(self, http_client, services):
        r = await http_client.fetch(f"{services.config.server.base_url}/auth/callback?code=x&state=y", raise_error=False)
        assert r.code == 400 and b"Start again" in r.body


class TestLoopbackOnly:
    """The built-in provider never serves beyond loopback."""

    @pytest.mark.parametrize(
        "server",
        [{"host": "0.0.0.0"}, {"host": "127.0.0.1", "base_url": "https://certs.example.com"}],
    )
    def test_start_up_refuses_a_non_loopback_address_without_an_issuer(self, server):
        with pytest.raises(ConfigError, match="oidc.issuer: required unless"):
            config_from_dict({"server": server})

    def test_start_up_refuses_a_non_loopback_portal_url_without_an_issuer(self):
        with pytest.raises(ConfigError, match="oidc.issuer: required unless server.portal_url is a loopback address"):
            config_from_dict({"server": {"portal_url": "https://portal.example.com"}})

    @pytest.mark.parametrize("proxies", [["10.0.0.0/8"], ["127.0.0.1"]])
    def test_start_up_refuses_trusted_proxies_without_an_issuer(self, proxies):
        with pytest.raises(ConfigError, match="oidc.issuer: required when server.trusted_proxies is set"):
            config_from_dict({"server": {"trusted_proxies": proxies}})

    def test_a_postgresql_database_is_allowed_when_every_address_is_loopback(self):
        config = config_from_dict({"storage": {"url": "postgresql://cps@127.0.0.1:5433/cps"},
                                   "server": {"port": 8081, "base_url": "http://127.0.0.1:8080"}})
        assert config.storage.url and not config.oidc.issuer

    @pytest.mark.parametrize("server", [{"host": "0.0.0.0"}, {"portal_url": "https://portal.example.com"},
                                        {"trusted_proxies": ["127.0.0.1"]}])
    def test_a_postgresql_database_is_refused_when_an_address_is_not_loopback(self, server):
        with pytest.raises(ConfigError, match="oidc.issuer: required"):
            config_from_dict({"storage": {"url": "postgresql://cps@db.internal/cps"}, "server": server})

    def test_an_external_issuer_may_serve_anywhere(self):
        server = {"host": "0.0.0.0", "portal_url": "https://portal.example.com", "trusted_proxies": ["10.0.0.0/8"]}
        config = config_from_dict({"server": server, "oidc": {"issuer": "https://idp.example", "client_id": "x"}})
        assert isinstance(config, Config)
