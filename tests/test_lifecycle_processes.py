"""The background checks in real service processes (``python app.py``), against the fake Cloudflare
API, the test DNS server and a real HTTPS webhook receiver, with ``[lifecycle] interval_seconds = 1``:
nothing is asked of the service after the domains are created.

- records published after creation end in an active certificate, and the spec's
  ``cert.issue_pending`` delivery arrives;
- two processes on one database file, one of them killed mid-sweep and started again: every due
  check is still done, and no domain is ever checked by both at once (the fake provider sees
  exactly one issuance request per hostname);
- a CAA record added exactly as the stopped issuance told (issue 46, item 3) ends in an active
  certificate on its own (the sandbox provider, ``max_interval_seconds = 2``).
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from core.config import load_config
from core.identity import accounts, api_keys
from core.runtime.assembly import build_services
from core.webhooks import endpoints
from tests.patience import PATIENCE_SECONDS
from tests.servers.cloudflare import TOKEN, ZONE_ID, FakeCloudflare
from tests.servers.https import HttpsReceiver
from tests.servers.service import ServiceProcess, call


@pytest.fixture
def receiver(dns):
    server = HttpsReceiver()
    dns.publish(server.hostname, "A", "127.0.0.1")
    yield server
    server.stop()


@pytest.fixture
def cloudflare():
    # The quota's window is the one the service is told (window_seconds = 5): checks every second
    # or two spend a 5-minute window's quota in a minute, and the service would then rightly wait.
    server = FakeCloudflare(window=5.0).start()
    yield server
    server.stop()


def service(folder: Path, dns, cloudflare: FakeCloudflare, receiver: HttpsReceiver, database: Path | None = None) -> ServiceProcess:
    """A webhook's request timeout only a hang reaches: a delivery that timed out on a busy machine
    is sent again, a second delivery. The provider's stays short: a killed process's checks are
    taken over once its lease ends, which grows with that timeout (55 s against 38 s with 10 s)."""
    process = ServiceProcess(
        folder, dns_address=dns.address,
        extra=(
            '[provider]\nkind = "cloudflare"\n'
            f'[provider.cloudflare]\napi_base = "{cloudflare.api_base}"\nzone_id = "{ZONE_ID}"\napi_token = "{TOKEN}"\n'
            "timeout_seconds = 2\nretry_seconds = 1\nwindow_seconds = 5\n"
            "[lifecycle]\ninterval_seconds = 1\nmax_interval_seconds = 2\n"
            "[webhooks]\npoll_interval_seconds = 0.5\nrequest_timeout_seconds = 10\n"
            f'[network]\nallow_private_ranges = ["127.0.0.0/8"]\nca_bundle = "{receiver.ca_pem_path}"\n'
        ),
    )
    if database is not None:  # a second process on the first one's database
        text = process.config.read_text().replace(str(process.database), str(database))
        process.config.write_text(text)
        process.database = database
    return process


async def workspace_with_key(config_path: Path, receiver: HttpsReceiver) -> str:
    """A workspace, a webhook endpoint to the receiver and a ``*`` key, through the service's own code."""
    services = build_services(load_config(config_path))
    try:
        workspace, _ = accounts.create_workspace(services, name="Acme", owner_email="owner@acme-test.com")
        await endpoints.create(services, workspace_id=workspace.id, request=endpoints.CreateWebhook(url=receiver.url()))
        _, secret = api_keys.create(services, workspace_id=workspace.id,
                                    request=api_keys.CreateKeyRequest(name="test", scopes=["*"]))
        return secret
    finally:
        services.close()


def add_domains(base_url: str, key: str, dns, apexes: list[str]) -> None:
    """Create the domains (nothing else is ever asked), then publish their records."""
    status, body = call(base_url, "POST", "/v1/domains/bulk", {"apexList": apexes}, token=key)
    assert status == 200 and not body["rejected"], body
    for apex in apexes:
        status, domain = call(base_url, "POST", "/v1/domains/query", {"q": apex}, token=key)
        [item] = [d for d in domain["items"] if d["apex"] == apex]
        dns.publish(f"_acme-challenge.{apex}", "CNAME", item["validation"]["delegation"]["value"])
        dns.publish(f"_service-verify.{apex}", "TXT", item["validation"]["ownership"]["value"])


def statuses(database: Path) -> dict[str, tuple[str, str]]:
    db = sqlite3.connect(database)
    try:
        return {apex: (v, c) for apex, v, c in db.execute("SELECT apex, validation_status, cert_status FROM domains")}
    finally:
        db.close()


async def until(condition, what: str, timeout: float = PATIENCE_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.2)


@pytest.mark.gen_test
async def test_records_published_after_creation_end_in_an_active_certificate_on_their_own(tmp_path, dns, cloudflare, receiver):
    running = service(tmp_path, dns, cloudflare, receiver)
    key = await workspace_with_key(running.config, receiver)
    running.start()
    try:
        add_domains(running.base_url, key, dns, ["shop.acme-test.com"])
        await until(lambda: statuses(running.database)["shop.acme-test.com"] == ("verified", "pending"),
                    "verified by a background check")
        await receiver.wait_for(1)
        cloudflare.set_state("shop.acme-test.com", status="active", ssl_status="active")  # the provider issues
        await until(lambda: statuses(running.database)["shop.acme-test.com"][1] == "active",
                    "the active certificate read back by a background check")
    finally:
        running.stop()
    assert [json.loads(r.body)["type"] for r in receiver.received] == ["cert.issue_pending"]


@pytest.mark.gen_test
async def test_two_processes_killed_and_restarted_check_every_domain_once_at_a_time(tmp_path, dns, cloudflare, receiver):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = service(tmp_path / "a", dns, cloudflare, receiver)
    second = service(tmp_path / "b", dns, cloudflare, receiver, database=first.database)
    key = await workspace_with_key(first.config, receiver)
    apexes = [f"shop{n}.acme-test.com" for n in range(60)]
    first.start()
    second.start()
    cloudflare.latency = 0.5  # checks stay in flight long enough for the kill to catch some
    try:
        add_domains(first.base_url, key, dns, apexes)
        await until(lambda: sum(v == "verified" for v, _ in statuses(first.database).values()) >= 5,
                    "the sweep under way")
        in_flight = len(cloudflare.issue_requests)
        first.kill()  # mid-sweep: whatever it had claimed stays leased until the lease runs out
        assert in_flight < len(apexes), "the kill came before every issuance was requested"
        first.start()
        await until(lambda: all(s == ("verified", "pending") for s in statuses(first.database).values()),
                    "every domain verified and its issuance started")
    finally:
        for process in (first, second):
            if process.process.poll() is None:
                process.stop()
    asked = {apex: [at for name, at in cloudflare.issue_requests if name == apex] for apex in apexes}
    assert all(asked.values()), "every domain's issuance was requested"
    # A second request for a hostname comes only from a check whose first process died holding its
    # lease: never from two processes checking it at once, which would ask within a second.
    assert all(times[-1] - times[0] > 10 for times in asked.values() if len(times) > 1), asked


@pytest.mark.gen_test
async def test_a_caa_fix_done_as_told_ends_in_an_active_certificate_on_its_own(tmp_path, dns, receiver):
    running = ServiceProcess(tmp_path, dns_address=dns.address, extra=(
        "[provider.sandbox]\nactivation_delay_seconds = 0\n"
        "[lifecycle]\ninterval_seconds = 1\nmax_interval_seconds = 2\n"
        f'[network]\nallow_private_ranges = ["127.0.0.0/8"]\nca_bundle = "{receiver.ca_pem_path}"\n'))
    key = await workspace_with_key(running.config, receiver)
    running.start()
    apex = "caa.acme-test.com"
    try:
        dns.publish_caa(apex, "issue", "ca.example.net")
        add_domains(running.base_url, key, dns, [apex])
        await until(lambda: statuses(running.database)[apex] == ("verified", "error"),
                    "issuance stopped by the CAA pre-flight")
        _, found = call(running.base_url, "POST", "/v1/domains/query", {"q": apex}, token=key)
        told = re.findall(r'(\S+)\. CAA 0 issue "([^"]+)"', found["items"][0]["cert"]["lastError"])
        for name, issuer in told:
            dns.publish_caa(name, "issue", issuer)
        # Measured: 1.3 to 1.7 s (the next check on the backoff, then the sandbox's answer).
        await until(lambda: statuses(running.database)[apex][1] == "active", "active after the CAA fix")
    finally:
        running.stop()
