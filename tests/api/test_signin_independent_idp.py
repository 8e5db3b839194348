"""Sign-in against an independent OpenID Connect provider (oidc-provider-mock), browserless."""

from __future__ import annotations

import socket
import time

import attrs
import pytest
from oidc_provider_mock import User, run_server_in_thread
from tornado.httpclient import HTTPRequest

from core.clock import SystemClock
from core.config import OidcConfig
from core.identity import oidc, signin
from tests.servers.pkce import authorize_params, code_from, new_flow, query

CLIENT_ID = "certificate-service"
REDIRECT_URI = "http://127.0.0.1:9/auth/callback"
OWNER = User(sub="alice", claims={"email": "alice@example.com", "email_verified": True})
UNVERIFIED = User(sub="bob", claims={"email": "bob@example.com", "email_verified": False})


@pytest.fixture(scope="module")
def provider():
    with run_server_in_thread(user_claims=[OWNER, UNVERIFIED]) as server:
        yield f"http://127.0.0.1:{server.server_port}"


@pytest.fixture
def clock():
    return SystemClock()  # the provider signs with the real time


@pytest.fixture
def config(config, provider):
    oidc = OidcConfig(issuer=provider, client_id=CLIENT_ID, client_secret="s3cret", redirect_uri=REDIRECT_URI)
    return attrs.evolve(config, oidc=oidc)


async def sign_in(http_client, provider, sub):
    flow = new_flow()
    params = authorize_params(flow, client_id=CLIENT_ID, redirect_uri=REDIRECT_URI)
    response = await http_client.fetch(
        HTTPRequest(f"{provider}/oauth2/authorize?{query(params)}", method="POST", body=query({"sub": sub}), follow_redirects=False),
        raise_error=False,
    )
    assert response.code == 302, response.body
    return code_from(response.headers["Location"]), flow


class TestIndependentProvider:
    """The exchange and the resulting session with a provider that is not ours."""

    @pytest.mark.gen_test
    async def test_sign_up_then_sign_in(self, api, http_client, provider):
        await api.post("/v1/public/signup", {"email": "alice@example.com", "domain": "alice.example.com"})
        code, flow = await sign_in(http_client, provider, "alice")
        r = await api.post("/v1/auth/oidc/exchange", {"code": code, "codeVerifier": flow["verifier"], "nonce": flow["nonce"]})
        assert r.status == 200 and r.body["email"] == "alice@example.com"
        session = await api.get("/v1/auth/session", token=r.body["token"])
        assert session.status == 200 and session.body["org"]["name"] == "alice.example.com"

    @pytest.mark.gen_test
    async def test_a_reused_code_is_an_invalid_grant(self, api, http_client, provider):
        await api.post("/v1/public/signup", {"email": "alice@example.com", "domain": "alice.example.com"})
        code, flow = await sign_in(http_client, provider, "alice")
        body = {"code": code, "codeVerifier": flow["verifier"]}
        assert (await api.post("/v1/auth/oidc/exchange", body)).status == 200
        again = await api.post("/v1/auth/oidc/exchange", body)
        assert (again.status, again.code) == (400, "invalid_grant")

    @pytest.mark.gen_test
    async def test_a_wrong_nonce_is_refused(self, api, http_client, provider):
        code, flow = await sign_in(http_client, provider, "alice")
        r = await api.post("/v1/auth/oidc/exchange", {"code": code, "codeVerifier": flow["verifier"], "nonce": "other"})
        assert (r.status, r.code) == (401, "invalid_token")

    @pytest.mark.gen_test
    async def test_an_unverified_email_is_refused(self, api, http_client, provider):
        await api.post("/v1/public/signup", {"email": "bob@example.com", "domain": "bob.example.com"})
        code, flow = await sign_in(http_client, provider, "bob")
        r = await api.post("/v1/auth/oidc/exchange", {"code": code, "codeVerifier": flow["verifier"]})
        assert (r.status, r.code) == (401, "invalid_token")
        assert "not verified" in r.body["message"]


class TestProviderDown:
    """A provider that does not answer is a 502, never a hang."""

    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, oidc=OidcConfig(issuer="http://127.0.0.1:9", client_id=CLIENT_ID))

    @pytest.mark.gen_test
    async def test_exchange_is_a_502(self, api):
        r = await api.post("/v1/auth/oidc/exchange", {"code": "abc", "codeVerifier": new_flow()["verifier"]})
        assert (r.status, r.code) == (502, "upstream_error")


SERVICE_TIMEOUT_SECONDS = min(oidc.HTTP_TIMEOUT_SECONDS, signin.TIMEOUT_SECONDS)
"The service's own bound on a provider's answer; the tests below set 0.5 s."


@pytest.fixture
def silent_issuer():
    """An issuer whose server takes the connection and the request, then never answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as sock:  # the kernel accepts; nobody reads
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


class TestProviderHangs:
    """A provider that stops answering mid-request is a 502 once the timeout is over, never a hang."""

    @pytest.fixture
    def config(self, config, silent_issuer, monkeypatch):
        monkeypatch.setattr(oidc, "HTTP_TIMEOUT_SECONDS", 0.5)  # SERVICE_TIMEOUT_SECONDS in service
        monkeypatch.setattr(signin, "TIMEOUT_SECONDS", 0.5)
        return attrs.evolve(config, oidc=OidcConfig(issuer=silent_issuer, client_id=CLIENT_ID))

    @pytest.mark.gen_test
    async def test_exchange_is_a_502_within_the_timeout(self, api):
        started = time.monotonic()
        r = await api.post("/v1/auth/oidc/exchange", {"code": "abc", "codeVerifier": new_flow()["verifier"]})
        assert (r.status, r.code) == (502, "upstream_error")
        assert time.monotonic() - started < SERVICE_TIMEOUT_SECONDS  # ended by the test's 0.5 s, however busy
