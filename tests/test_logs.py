"""The log as ``[logging]`` shapes it: every line of a request carries its request id and workspace,
text or JSON, and no secret the run created ever appears in it."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import secrets as random_secrets

import attrs
import pytest
from tornado.httpclient import HTTPRequest

from core import logs
from core.config import LoggingConfig, MetricsConfig, NetworkConfig, OidcConfig, ServerConfig
from core.identity.dev_idp import DEFAULT_CLIENT_ID
from core.webhooks.worker import WebhookWorker
from tests.helpers import mark_verified
from tests.servers.https import HttpsReceiver
from tests.servers.pkce import authorize_params, code_from, new_flow, query


@pytest.fixture
def captured():
    """The root logger writing to a buffer in a given format; the test run's handlers put back after."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buffer = io.StringIO()

    def configure(fmt: str) -> io.StringIO:
        logs.configure(LoggingConfig(format=fmt, level="debug"), stream=buffer)
        return buffer

    yield configure
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])


@pytest.fixture(scope="module")
def receiver():
    with HttpsReceiver() as server:
        yield server


@pytest.fixture
def config(config, receiver):
    return attrs.evolve(config, network=NetworkConfig(allow_private_ranges=["127.0.0.0/8"], ca_bundle=receiver.ca_pem_path))


class TestRequestContext:
    @pytest.mark.gen_test
    async def test_text_lines_carry_the_request_id_and_workspace(self, api, world, captured):
        buffer = captured("text")
        owner = world.owner()
        r = await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)
        [line] = [line for line in buffer.getvalue().splitlines() if "POST /v1/domains" in line]
        assert line.endswith(f"[rid={r.headers['X-Request-Id']} ws={owner.workspace.id}]")

    @pytest.mark.gen_test
    async def test_a_static_files_line_carries_its_own_request_id(self, api, world, captured, http_client, base_url):
        buffer = captured("text")
        await api.post("/v1/domains", {"apex": "shop.example.com"}, token=world.owner().token)
        r = await http_client.fetch(base_url + "/static/portal.css")
        [line] = [line for line in buffer.getvalue().splitlines() if "GET /static/portal.css" in line]
        assert line.endswith(f"[rid={r.headers['X-Request-Id']} ws=-]")

    @pytest.mark.gen_test
    async def test_json_lines_are_objects_with_the_request_id_and_workspace(self, api, world, captured):
        buffer = captured("json")
        owner = world.owner()
        r = await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)
        entries = [json.loads(line) for line in buffer.getvalue().splitlines()]
        [entry] = [e for e in entries if "POST /v1/domains" in e["message"]]
        assert (entry["requestId"], entry["workspace"], entry["logger"]) == (r.headers["X-Request-Id"], str(owner.workspace.id), "access")

    @pytest.mark.gen_test
    async def test_a_line_written_in_core_code_carries_the_request_id_and_workspace(self, api, world, services, captured):
        buffer = captured("text")
        owner = world.owner()
        d = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        mark_verified(services, d)
        r = await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)
        [line] = [line for line in buffer.getvalue().splitlines() if " core.certificates.results: certificate " in line]
        assert line.endswith(f"[rid={r.headers['X-Request-Id']} ws={owner.workspace.id}]")

    @pytest.mark.gen_test
    async def test_a_line_outside_any_request_has_no_request_fields(self, captured):
        buffer = captured("json")
        logging.getLogger("somewhere").warning("background work")
        entry = json.loads(buffer.getvalue().splitlines()[-1])
        assert "requestId" not in entry and entry["message"] == "background work"


class TestVerificationLinkRequests:
    """A link's token is its holder's only credential; once it names a link, the request's lines
    carry that link's workspace."""

    async def link(self, api, world):
        owner = world.owner()
        domain = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        url = (await api.post("/v1/verification-links", {"domainId": domain["id"]}, token=owner.token)).body["url"]
        return owner, url.rsplit("/", 1)[1]

    @pytest.mark.gen_test
    async def test_the_api_lines_carry_the_links_workspace(self, api, world, captured):
        buffer = captured("text")
        owner, token = await self.link(api, world)
        r = await api.get(f"/v1/public/verification-links/{token}")
        [line] = [line for line in buffer.getvalue().splitlines() if "GET /v1/public/verification-links/" in line]
        assert line.endswith(f"[rid={r.headers['X-Request-Id']} ws={owner.workspace.id}]")

    @pytest.mark.gen_test
    async def test_a_line_written_in_core_code_for_a_link_carries_its_workspace(self, api, world, captured):
        buffer = captured("json")
        owner, token = await self.link(api, world)
        r = await api.post(f"/v1/public/verification-links/{token}/verify")
        entries = [json.loads(line) for line in buffer.getvalue().splitlines()]
        [entry] = [e for e in entries if e["logger"] == "core.verification.links" and e["message"].endswith(": verify")]
        assert (entry["requestId"], entry["workspace"]) == (r.headers["X-Request-Id"], str(owner.workspace.id))

    @pytest.mark.gen_test
    async def test_the_verification_pages_line_carries_the_links_workspace(self, api, world, captured, http_client, base_url):
        buffer = captured("text")
        owner, token = await self.link(api, world)
        r = await http_client.fetch(f"{base_url}/verify/{token}")
        [line] = [line for line in buffer.getvalue().splitlines() if "GET /verify/" in line]
        assert line.endswith(f"[rid={r.headers['X-Request-Id']} ws={owner.workspace.id}]")


#: Configured for the secret-grep run: the built-in identity provider's client secret and the
#: metrics bearer token (each run makes new ones, so a hit can only come from this run).
CLIENT_SECRET = "oidc-client-" + random_secrets.token_urlsafe(24)
METRICS_TOKEN = "metrics-" + random_secrets.token_urlsafe(24)


class TestTheAccessLine:
    """Written without a LogRecord when the service's own handler alone would write it."""

    @pytest.mark.parametrize("fmt", ["text", "json"])
    def test_written_directly_it_is_the_line_logging_writes(self, captured, fmt):
        buffer = captured(fmt)
        access = logging.getLogger("access")
        rid, ws = logs.request_id.set("r1"), logs.workspace.set("w1")
        try:
            logs.direct_handler(access, logging.INFO).write_direct(logging.INFO, "access", "200 GET /x (-@ip) 1.0ms")
            access.info("200 GET /x (-@ip) 1.0ms")
        finally:
            logs.request_id.reset(rid)
            logs.workspace.reset(ws)
        direct, logged = buffer.getvalue().splitlines()
        if fmt == "json":
            direct, logged = json.loads(direct), json.loads(logged)
            assert direct.pop("time")[:16] == logged.pop("time")[:16]
        else:
            assert direct.split(" ", 2)[0] == logged.split(" ", 2)[0]
            direct, logged = direct.split(" ", 2)[2], logged.split(" ", 2)[2]
        assert direct == logged

    def test_another_handler_on_the_root_gets_records_instead(self, captured):
        captured("text")
        extra = logging.NullHandler()
        logging.getLogger().addHandler(extra)
        try:
            assert logs.direct_handler(logging.getLogger("access"), logging.INFO) is None
        finally:
            logging.getLogger().removeHandler(extra)

    def test_a_level_below_the_configured_one_is_not_written(self, captured):
        captured("text")
        logging.getLogger().setLevel(logging.WARNING)
        assert logs.direct_handler(logging.getLogger("access"), logging.INFO) is None


class TestNoSecrets:
    @pytest.fixture
    def config(self, config, http_port):
        """The built-in development identity provider (no issuer), with a configured client secret."""
        here = f"http://127.0.0.1:{http_port}"
        return attrs.evolve(config, oidc=OidcConfig(client_secret=CLIENT_SECRET),
                            server=ServerConfig(base_url=here, portal_url=here),
                            metrics=MetricsConfig(bearer_token=METRICS_TOKEN))

    async def dev_sign_in(self, http_client, services, email) -> tuple[str, dict]:
        """The browser's part of a sign-in at the built-in provider: its form, then the code."""
        flow = new_flow()
        params = authorize_params(flow, client_id=DEFAULT_CLIENT_ID, redirect_uri=services.oidc_client.redirect_uri)
        base = services.config.server.base_url
        await http_client.fetch(f"{base}/idp/authorize?{query(params)}")
        response = await http_client.fetch(HTTPRequest(f"{base}/idp/authorize", method="POST", follow_redirects=False,
                                                       body=query({**params, "email": email})), raise_error=False)
        assert response.code == 302, response.body
        return code_from(response.headers["Location"]), flow

    @pytest.mark.gen_test
    @pytest.mark.parametrize("fmt", ["text", "json"])
    async def test_a_full_run_writes_none_of_the_secrets_it_made(self, api, services, dns, receiver, captured, fmt,
                                                                  http_client, base_url):
        buffer = captured(fmt)
        dns.publish(receiver.hostname, "A", "127.0.0.1")
        assert (await api.post("/v1/public/signup", {"email": "owner@example.com", "domain": "first.example.com"})).status == 201
        code, flow = await self.dev_sign_in(http_client, services, "owner@example.com")
        session = (await api.post("/v1/auth/oidc/exchange", {"code": code, "codeVerifier": flow["verifier"], "nonce": flow["nonce"]})).body
        owner_token = session["token"]  # the ID token, the session's bearer
        assert (await api.get("/v1/auth/session", token=owner_token)).status == 200
        secrets = [CLIENT_SECRET, METRICS_TOKEN, code, flow["verifier"], owner_token, session["accessToken"]]
        key = (await api.post("/v1/api-keys", {"name": "ci", "scopes": ["*"]}, token=owner_token)).body["secret"]
        hook = (await api.post("/v1/webhooks", {"url": receiver.url()}, token=owner_token)).body["secret"]
        domain = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=key)).body
        link = (await api.post("/v1/verification-links", {"domainId": domain["id"]}, token=owner_token)).body["url"]
        token = link.rsplit("/", 1)[1]
        secrets += [key, hook, token]
        await api.get(f"/v1/public/verification-links/{token}")
        await api.post(f"/v1/public/verification-links/{token}/verify")
        mark_verified(services, domain)
        await api.post(f"/v1/domains/{domain['id']}/certificates/issue", {}, token=key)
        await WebhookWorker(services).tick()
        await receiver.wait_for(1)
        await api.get("/v1/domains/query", token=key + "tampered")
        [listed] = (await api.get("/v1/api-keys", token=key)).body
        secrets.append((await api.post(f"/v1/api-keys/{listed['id']}/rotate", token=owner_token)).body["secret"])
        for bearer in (METRICS_TOKEN, METRICS_TOKEN + "x"):
            await http_client.fetch(HTTPRequest(f"{base_url}/metrics", headers={"Authorization": f"Bearer {bearer}"}),
                                    raise_error=False)
        text = buffer.getvalue()
        assert "rid=" in text or "requestId" in text  # the run was logged
        for secret in secrets:
            assert secret not in text
            assert secret[-24:] not in text  # nor a recognisable piece of it


class _CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def _record(level: int) -> logging.LogRecord:
    return logging.LogRecord("access", level, __file__, 1, "line at %s", (logging.getLevelName(level),), None)


class TestBatching:
    """INFO lines (one per request) are flushed in batches; warnings and errors at once."""

    @pytest.mark.gen_test
    async def test_info_lines_in_the_event_loop_are_flushed_together_shortly_after(self) -> None:
        stream = _CountingStream()
        handler = logs.BatchingHandler(stream)
        for _ in range(3):
            handler.emit(_record(logging.INFO))
        assert stream.getvalue().count("line at INFO") == 3
        assert stream.flushes == 0
        await asyncio.sleep(logs.BatchingHandler.FLUSH_DELAY_SECONDS * 2)
        assert stream.flushes == 1

    def test_lines_are_still_flushed_after_an_event_loop_ended_before_its_flush(self) -> None:
        stream = _CountingStream()
        handler = logs.BatchingHandler(stream)

        async def log_and_leave() -> None:
            handler.emit(_record(logging.INFO))

        async def log_and_wait() -> None:
            handler.emit(_record(logging.INFO))
            await asyncio.sleep(logs.BatchingHandler.FLUSH_DELAY_SECONDS * 2)

        for work in (log_and_leave, log_and_wait):  # the first loop closes before its flush is due
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(work())
            finally:
                loop.close()
        assert stream.flushes == 1

    @pytest.mark.gen_test
    async def test_a_warning_is_flushed_at_once(self) -> None:
        stream = _CountingStream()
        logs.BatchingHandler(stream).emit(_record(logging.WARNING))
        assert stream.flushes == 1

    def test_outside_an_event_loop_every_line_is_flushed_at_once(self) -> None:
        stream = _CountingStream()
        logs.BatchingHandler(stream).emit(_record(logging.INFO))
        assert stream.flushes == 1
