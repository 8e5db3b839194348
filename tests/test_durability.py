"""Nothing is lost: the service is killed (SIGKILL) while webhook deliveries are queued and in
flight, restarted on the same database, and every delivery still arrives.

The service runs as ``python app.py --config FILE``, as an operator runs it; the receiver is a
real HTTPS server on loopback with a test CA, reached by a name the test DNS server answers.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from core import accounts
from core.config import load_config
from core.services import build_services
from core.webhooks import endpoints
from store.records import OutboxEvent
from tests.servers.https import HttpsReceiver

ROOT = Path(__file__).resolve().parent.parent
EVENTS = 40


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp_path: Path, dns, receiver: HttpsReceiver) -> Path:
    path = tmp_path / "service.toml"
    port = free_port()
    path.write_text(
        f"""
[server]
port = {port}
base_url = "http://127.0.0.1:{port}"
portal_url = "http://127.0.0.1:{port}"
[storage]
path = "{tmp_path / 'service.sqlite3'}"
secret_key_file = "{tmp_path / 'secret.key'}"
[dns]
nameservers = ["{dns.address}"]
timeout_seconds = 0.5
[webhooks]
poll_interval_seconds = 0.5
request_timeout_seconds = 1
[network]
allow_private_ranges = ["127.0.0.0/8"]
ca_bundle = "{receiver.ca_pem_path}"
"""
    )
    return path


async def queue_events(config_path: Path, receiver: HttpsReceiver) -> set[str]:
    """An endpoint and EVENTS undelivered outbox events, written through the service's own code."""
    services = build_services(load_config(config_path))
    try:
        workspace, _ = accounts.create_workspace(services, name="Acme", owner_email="owner@acme-test.com")
        await endpoints.create(services, workspace_id=workspace.id, request=endpoints.CreateWebhook(url=receiver.url()))
        marks = set()
        with services.store.transaction():
            for _ in range(EVENTS):
                mark = str(uuid.uuid4())
                marks.add(mark)
                data = {"domainId": str(uuid.uuid4()), "apex": "shop.acme-test.com", "certificateId": mark,
                        "status": "pending", "provider": "edge_provider_for_saas"}
                services.store.outbox.insert(
                    OutboxEvent(id=uuid.uuid4(), workspace_id=workspace.id, type="cert.issue_pending", data=data,
                                created_at=services.clock.now())
                )
        return marks
    finally:
        services.close()


def start(config_path: Path, log: Path) -> subprocess.Popen:
    with log.open("ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, str(ROOT / "app.py"), "--config", str(config_path)],
            cwd=config_path.parent, stdout=out, stderr=subprocess.STDOUT,
        )


def marks_received(receiver: HttpsReceiver) -> list[str]:
    return [json.loads(r.body)["data"]["certificateId"] for r in receiver.received]


@pytest.fixture
def receiver(dns):
    server = HttpsReceiver()
    dns.publish(server.hostname, "A", "127.0.0.1")
    yield server
    server.stop()


class TestKilledMidDelivery:
    """SIGKILL with deliveries queued and in flight."""

    @pytest.mark.gen_test(timeout=60)
    async def test_every_delivery_arrives_after_a_restart(self, tmp_path, dns, receiver):
        config_path = write_config(tmp_path, dns, receiver)
        marks = await queue_events(config_path, receiver)
        receiver.respond_with(200, delay=0.4)  # slow enough that some are in flight when killed
        log = tmp_path / "service.log"
        first = start(config_path, log)
        try:
            await receiver.wait_for(5, timeout=20)
            assert receiver.in_flight > 0, "deliveries are in flight at the kill"
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        killed_at = len(receiver.received)
        assert killed_at < EVENTS, "the kill came before everything was delivered"

        receiver.respond_with(200)
        second = start(config_path, log)
        try:
            deadline = time.monotonic() + 30
            while not marks <= set(marks_received(receiver)) and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(10)

        got = marks_received(receiver)
        assert marks <= set(got), f"lost: {len(marks - set(got))} of {EVENTS}\n{log.read_text()[-2000:]}"
        assert max(got.count(m) for m in marks) <= 2, "a crash resends at most once more"
        db = sqlite3.connect(tmp_path / "service.sqlite3")
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM webhook_deliveries WHERE status != 'delivered'").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM outbox_events WHERE dispatched_at IS NULL").fetchone() == (0,)
