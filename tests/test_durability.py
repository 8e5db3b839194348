"""Nothing is lost: the service is killed (SIGKILL) while webhook deliveries are queued and in
flight, restarted on the same database, and every delivery still arrives.

The service runs as ``python app.py --config FILE``, as an operator runs it; the receiver is a
real HTTPS server on loopback with a test CA, reached by a name the test DNS server answers.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from core.config import load_config
from core.identity import accounts
from core.runtime.assembly import build_services
from core.webhooks import endpoints
from store.records import OutboxEvent
from tests.patience import PATIENCE_SECONDS
from tests.servers.https import HttpsReceiver
from tests.servers.service import ServiceProcess

EVENTS = 100  # more than the worker sends at once (64), so some are still queued at the kill


def service(tmp_path: Path, dns, receiver: HttpsReceiver) -> ServiceProcess:
    """Its request timeout is one a busy machine does not reach: a send that timed out is sent again,
    which is not the crash's doing (at 1 s, a CI run once saw one delivery three times). What was in
    flight at the kill is sent again once its lease (twice that, and 5 s) runs out."""
    return ServiceProcess(
        tmp_path, dns_address=dns.address,
        extra="[webhooks]\npoll_interval_seconds = 0.5\nrequest_timeout_seconds = 10\n"
              f'[network]\nallow_private_ranges = ["127.0.0.0/8"]\nca_bundle = "{receiver.ca_pem_path}"\n',
    )


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


def undelivered(database: Path) -> int:
    db = sqlite3.connect(database)
    try:
        return db.execute("SELECT count(*) FROM webhook_deliveries WHERE status != 'delivered'").fetchone()[0]
    finally:
        db.close()


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

    @pytest.mark.gen_test
    async def test_every_delivery_arrives_after_a_restart(self, tmp_path, dns, receiver):
        running = service(tmp_path, dns, receiver)
        marks = await queue_events(running.config, receiver)
        receiver.respond_with(200, delay=0.4)  # slow enough that some are in flight when killed
        running.start(wait=False)
        try:
            await receiver.wait_for(5)
            assert receiver.in_flight > 0, "deliveries are in flight at the kill"
        finally:
            running.kill()
        assert len(receiver.received) < EVENTS, "the kill came before everything was delivered"

        receiver.respond_with(200)
        running.start(wait=False)
        try:
            # Until every delivery is recorded delivered: one received before the kill but not
            # recorded is sent again once its lease runs out, which a busy machine reaches later
            # than the last mark's arrival.
            deadline = time.monotonic() + PATIENCE_SECONDS
            while not (marks <= set(marks_received(receiver)) and not undelivered(running.database)) \
                    and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
        finally:
            running.stop()

        got = marks_received(receiver)
        assert marks <= set(got), f"lost: {len(marks - set(got))} of {EVENTS}\n{running.log.read_text()[-2000:]}"
        assert max(got.count(m) for m in marks) <= 2, "a crash resends at most once more"
        db = sqlite3.connect(running.database)
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM webhook_deliveries WHERE status != 'delivered'").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM outbox_events WHERE dispatched_at IS NULL").fetchone() == (0,)
