"""The log as ``[logging]`` shapes it: every line of a request carries its request id and workspace,
text or JSON, and no secret the run created ever appears in it."""

from __future__ import annotations

import io
import json
import logging

import attrs
import pytest

from core import logs
from core.config import LoggingConfig, NetworkConfig
from core.webhooks.worker import WebhookWorker
from tests.helpers import mark_verified
from tests.servers.https import HttpsReceiver


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
    async def test_a_line_outside_any_request_has_no_request_fields(self, captured):
        buffer = captured("json")
        logging.getLogger("somewhere").warning("background work")
        entry = json.loads(buffer.getvalue().splitlines()[-1])
        assert "requestId" not in entry and entry["message"] == "background work"


class TestNoSecrets:
    @pytest.mark.gen_test(timeout=30)
    @pytest.mark.parametrize("fmt", ["text", "json"])
    async def test_a_full_run_writes_none_of_the_secrets_it_made(self, api, world, services, dns, receiver, captured, fmt):
        buffer = captured(fmt)
        dns.publish(receiver.hostname, "A", "127.0.0.1")
        owner = world.owner()
        secrets = [owner.token]
        key = (await api.post("/v1/api-keys", {"name": "ci", "scopes": ["*"]}, token=owner.token)).body["secret"]
        hook = (await api.post("/v1/webhooks", {"url": receiver.url()}, token=owner.token)).body["secret"]
        domain = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=key)).body
        link = (await api.post("/v1/verification-links", {"domainId": domain["id"]}, token=owner.token)).body["url"]
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
        secrets.append((await api.post(f"/v1/api-keys/{listed['id']}/rotate", token=owner.token)).body["secret"])
        text = buffer.getvalue()
        assert "rid=" in text or "requestId" in text  # the run was logged
        for secret in secrets:
            assert secret not in text
            assert secret[-24:] not in text  # nor a recognisable piece of it
