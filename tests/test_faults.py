"""Faults: the process killed in the middle of writes, and a database that cannot be written.

Nothing may be half-written after a SIGKILL (a bulk create is all or nothing, a certificate goes
with its domain's status, an idempotency claim can be taken over), and a read-only or full
database is a clear 503 in the envelope, never corruption or a hang, until it can be written again.
(Webhook deliveries under SIGKILL: tests/test_durability.py.)
"""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.request

import pytest

import app
from core.certificates.idempotency import LEASE
from core.wire import format_timestamp, parse_timestamp
from handlers.limits import HEADER_TIMEOUT_SECONDS
from tests.pages.portal_client import Browser, sign_in
from tests.patience import PATIENCE_SECONDS
from tests.servers.service import ServiceProcess, call

BULKS, PER_BULK = 12, 400



class TestKilledMidWrite:
    @pytest.fixture
    def service(self, tmp_path, dns):
        running = ServiceProcess(
            tmp_path, dns_address=dns.address,
            extra="[provider.sandbox]\nsimulate_dns = true\nsimulate_dns_delay_seconds = 0\nactivation_delay_seconds = 0\n",
        )
        yield running
        if running.process is not None and running.process.poll() is None:
            running.stop()

    def key_for(self, service: ServiceProcess, capsys) -> str:
        status, body = call(service.base_url, "POST", "/v1/public/signup", {"email": "ops@example.com", "domain": "first.example.com"})
        assert status == 201, body
        assert app.main(["create-api-key", "--workspace", body["domain"]["orgId"], "--scopes", "*", "--config", str(service.config)]) == 0
        return capsys.readouterr().out.splitlines()[1]

    def load(self, service: ServiceProcess, key: str, stop: threading.Event) -> None:
        """Bulk creates and issuances, one after another, until the process dies under them."""
        for n in range(BULKS):
            if stop.is_set():
                return
            names = [f"h{i}.bulk{n}.example.com" for i in range(PER_BULK)]
            try:
                call(service.base_url, "POST", "/v1/domains/bulk", {"apexList": names, "tags": [f"bulk{n}"]}, token=key)
                status, page = call(service.base_url, "POST", "/v1/domains/query",
                                    {"tags": [f"bulk{n}"], "page": {"limit": 5}}, token=key)
                for domain in page["items"] if status == 200 else []:
                    call(service.base_url, "POST", f"/v1/domains/{domain['id']}/verify-delegation", token=key)
                    call(service.base_url, "POST", f"/v1/domains/{domain['id']}/certificates/issue", {}, token=key,
                         headers={"Idempotency-Key": f"issue-{domain['id']}"})
            except (OSError, urllib.error.URLError):
                return  # the process is gone

    def test_nothing_is_half_written_after_a_sigkill(self, service, capsys):
        service.start()
        key = self.key_for(service, capsys)
        stop = threading.Event()
        workers = [threading.Thread(target=self.load, args=(service, key, stop)) for _ in range(3)]
        for worker in workers:
            worker.start()
        time.sleep(1.5)
        service.kill()
        stop.set()
        for worker in workers:
            worker.join(15)

        db = sqlite3.connect(service.database)
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        sizes = dict(db.execute("SELECT tag, count(*) FROM domain_tags GROUP BY tag").fetchall())
        assert sizes and set(sizes.values()) == {PER_BULK}, sizes  # each bulk whole, or not there at all
        assert db.execute("SELECT count(*) FROM domains WHERE apex LIKE '%.bulk%'").fetchone()[0] == sum(sizes.values())
        # Every certificate goes with its domain, and a domain that says it has one has one.
        assert db.execute("SELECT count(*) FROM certificates WHERE domain_id NOT IN (SELECT id FROM domains)").fetchone() == (0,)
        assert db.execute(
            "SELECT count(*) FROM domains WHERE cert_status != 'none' AND id NOT IN (SELECT domain_id FROM certificates)"
        ).fetchone() == (0,)
        # An idempotency claim is completed with its answer, or its lease runs out so a retry takes it over.
        for state, response, created, locked in db.execute(
            "SELECT state, response, created_at, locked_until FROM idempotency_keys"
        ):
            assert (state == "completed" and response) or (state == "in_progress" and locked <= _plus(created, LEASE))
        db.close()

        service.start()  # the same database, after the kill
        status, page = call(service.base_url, "POST", "/v1/domains/query", {"page": {"limit": 1}}, token=key)
        assert status == 200 and page["total"] == sum(sizes.values()) + 1


def _plus(timestamp: str, delta) -> str:
    return format_timestamp(parse_timestamp(timestamp) + delta)


class TestDatabaseCannotBeWritten:
    @pytest.mark.gen_test
    async def test_a_read_only_database_is_a_503_with_retry_after(self, api, world, services):
        owner = world.owner()
        await api.get("/v1/auth/session", token=owner.token)  # the first sign-in binds the user: a write
        services.store.db.execute("PRAGMA query_only = ON")
        try:
            r = await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)
            assert (r.status, r.code, r.headers["Retry-After"]) == (503, "storage_unavailable", "30")
            assert "read-only" in r.body["message"] and "nothing was changed" in r.body["message"]
            assert (await api.post("/v1/domains/query", {}, token=owner.token)).status == 200  # reads go on
        finally:
            services.store.db.execute("PRAGMA query_only = OFF")
        assert (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).status == 201

    @pytest.mark.gen_test
    async def test_a_full_disk_is_a_503_and_nothing_half_written(self, api, world, services):
        owner = world.owner()
        db = services.store.db
        [pages] = db.execute("PRAGMA page_count").fetchone()
        db.execute(f"PRAGMA max_page_count = {pages}")
        try:
            names = [f"h{i}.full.example.com" for i in range(500)]
            r = await api.post("/v1/domains/bulk", {"apexList": names}, token=owner.token)
            assert (r.status, r.code) == (503, "storage_unavailable")
            assert "disk is full" in r.body["message"]
        finally:
            db.execute("PRAGMA max_page_count = 1073741823")
        assert db.execute("SELECT count(*) FROM domains WHERE apex LIKE '%.full.example.com'").fetchone()[0] == 0
        assert (await api.post("/v1/domains/bulk", {"apexList": names}, token=owner.token)).status == 200
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    @pytest.mark.gen_test
    async def test_a_portal_page_says_503_too(self, http_client, base_url, services, world):
        owner = world.owner()
        browser = Browser(http_client, base_url)
        sign_in(browser, services, owner)
        form = await browser.form_on("/domains", "/domains")
        services.store.db.execute("PRAGMA query_only = ON")
        try:
            r = await browser.post("/domains", {**form, "hostnames": "shop.example.com"})
        finally:
            services.store.db.execute("PRAGMA query_only = OFF")
        assert r.code == 503 and b"Traceback" not in r.body


class TestIdleConnections:
    def test_a_thousand_idle_connections_do_not_stop_others_being_served(self, tmp_path, dns):
        service = ServiceProcess(tmp_path, dns_address=dns.address).start()
        idle = []
        try:
            opened = time.monotonic()
            for _ in range(1000):
                idle.append(socket.create_connection(("127.0.0.1", service.port), timeout=PATIENCE_SECONDS))
            status, body = call(service.base_url, "GET", "/v1/auth/session")
            assert (status, body) == (200, None)
            # Answered while every idle one was still open: none can have reached the service's idle timeout.
            assert time.monotonic() - opened < HEADER_TIMEOUT_SECONDS
        finally:
            for sock in idle:
                sock.close()
            service.stop()


class TestShutdown:
    def test_a_request_in_progress_at_sigterm_is_answered_before_the_store_closes(self, tmp_path, capsys):
        """SIGTERM while a verification waits on DNS: the answer still comes, and nothing touches a
        closed database (before, the request died with "Cannot operate on a closed database")."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mute:  # a resolver that never answers
            mute.bind(("127.0.0.1", 0))
            service = ServiceProcess(tmp_path, dns_address=f"127.0.0.1:{mute.getsockname()[1]}").start()
            status, body = call(service.base_url, "POST", "/v1/public/signup", {"email": "ops@example.com", "domain": "shop.example.com"})
            assert status == 201, body
            assert app.main(["create-api-key", "--workspace", body["domain"]["orgId"], "--scopes", "*",
                             "--config", str(service.config)]) == 0
            answers = []

            def verify(key: str) -> None:
                answers.append(call(service.base_url, "POST", f"/v1/domains/{body['domain']['id']}/verify-delegation", token=key))

            key = capsys.readouterr().out.splitlines()[1]
            request = threading.Thread(target=verify, args=(key,))
            request.start()
            time.sleep(0.3)  # the lookups are under way (0.5 s timeout, retried)
            service.process.terminate()
            request.join(15)
            assert service.process.wait(15) == 0
        [(status, result)] = answers
        assert status == 200 and result["status"] != "verified", result
        log = service.log.read_text()
        assert "Traceback" not in log and "closed database" not in log
