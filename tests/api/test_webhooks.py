"""Webhooks: endpoints, signed deliveries to a real HTTPS receiver (test CA), retries, the log.

The receiver is reached by a DNS name that the test DNS server answers with 127.0.0.1, allowed by
``[network] allow_private_ranges``; its certificate comes from a trustme CA given as
``[network] ca_bundle``. The worker runs when a test says so (``await worker.tick()``), after
moving the clock.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import re
import uuid
from pathlib import Path

import attrs
import pytest

from core.config import NetworkConfig, WebhooksConfig
from core.webhooks.worker import WebhookWorker, retry_delay
from tests.helpers import mark_verified
from tests.servers.https import HttpsReceiver

WEBHOOKS_PAGE = Path(__file__).resolve().parent.parent.parent / "docs" / "webhooks.md"


@pytest.fixture(scope="module")
def receiver():
    server = HttpsReceiver()
    yield server
    server.stop()


@pytest.fixture
def hook(receiver, dns):
    receiver.reset()
    dns.publish(receiver.hostname, "A", "127.0.0.1")
    return receiver


@pytest.fixture
def max_attempts():
    return 6


@pytest.fixture
def config(config, receiver, max_attempts):
    return attrs.evolve(
        config,
        network=NetworkConfig(allow_private_ranges=["127.0.0.0/8"], ca_bundle=receiver.ca_pem_path),
        webhooks=WebhooksConfig(max_attempts=max_attempts, request_timeout_seconds=2),
    )


@pytest.fixture
def worker(services):
    return WebhookWorker(services, rng=random.Random(7))


def readme_verifier():
    """The receiver snippet of the docs' "Verifying a delivery", run exactly as written there."""
    text = WEBHOOKS_PAGE.read_text()
    section = text[text.index("## Verifying a delivery"):]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/webhooks.md", "exec"), namespace)  # noqa: S102 -- the docs' snippet itself is under test
    return namespace["verify_webhook"]


async def register(api, owner, hook, **fields):
    r = await api.post("/v1/webhooks", {"url": hook.url(), **fields}, token=owner.token)
    assert r.status == 201, r.body
    return r.body


async def issue_certificate(api, services, owner, apex="shop.example.com"):
    """A new issuance request (sandbox: pending), which queues one cert.issue_pending event."""
    d = (await api.post("/v1/domains", {"apex": apex}, token=owner.token)).body
    mark_verified(services, d)
    return (await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)).body


def deliveries(services, endpoint_id):
    return services.store.webhooks.deliveries(uuid.UUID(endpoint_id), after=None, limit=100)


class TestEndpoints:
    """Register, list, change, delete, rotate."""

    @pytest.mark.gen_test
    async def test_registration_answers_the_secret_once(self, api, world, hook):
        owner = world.owner()
        created = await register(api, owner, hook)
        assert re.fullmatch(r"whsec_[A-Za-z0-9_-]{43}", created["secret"])
        assert (created["url"], created["events"], created["status"]) == (hook.url(), [], "active")
        listed = (await api.get("/v1/webhooks", token=owner.token)).body
        assert [e["id"] for e in listed] == [created["id"]] and "secret" not in listed[0]

    @pytest.mark.gen_test
    async def test_the_secret_is_stored_encrypted(self, api, world, hook, services):
        owner = world.owner()
        created = await register(api, owner, hook)
        stored = services.store.webhooks.get_endpoint(owner.workspace.id, uuid.UUID(created["id"]))
        assert created["secret"] not in stored.secret_ciphertext

    @pytest.mark.sqlite_only
    @pytest.mark.gen_test
    async def test_the_database_file_never_holds_the_secret(self, api, world, hook, services):
        created = await register(api, world.owner(), hook)
        services.store.db.conn.execute("PRAGMA wal_checkpoint(FULL)")
        assert created["secret"].encode() not in Path(services.config.storage.path).read_bytes()

    @pytest.mark.gen_test
    async def test_patch_changes_events_and_status(self, api, world, hook):
        owner = world.owner()
        created = await register(api, owner, hook)
        r = await api.patch(f"/v1/webhooks/{created['id']}", {"events": ["cert.issued"], "status": "disabled"}, token=owner.token)
        assert (r.status, r.body["events"], r.body["status"]) == (200, ["cert.issued"], "disabled")
        assert "secret" not in r.body

    @pytest.mark.parametrize("char", ["\x85", "\xa0", "\u2028"])
    @pytest.mark.gen_test
    async def test_an_event_name_ending_in_white_space_other_than_a_space_is_refused(self, api, world, hook, char):
        """Refused at the end as inside (issue 37, item 14): not trimmed away by str.strip."""
        owner = world.owner()
        for name in (f"cert.issued{char}", f"cert.{char}issued"):
            r = await api.post("/v1/webhooks", {"url": hook.url(), "events": [name]}, token=owner.token)
            assert (r.status, r.code) == (400, "validation_error") and "events" in r.body["details"]["fieldErrors"], name

    @pytest.mark.gen_test
    async def test_spaces_around_an_event_name_are_trimmed(self, api, world, hook):
        created = await register(api, world.owner(), hook, events=[" cert.issued  "])
        assert created["events"] == ["cert.issued"]

    @pytest.mark.gen_test
    async def test_patch_refuses_an_unknown_status(self, api, world, hook):
        owner = world.owner()
        created = await register(api, owner, hook)
        r = await api.patch(f"/v1/webhooks/{created['id']}", {"status": "paused"}, token=owner.token)
        assert (r.status, r.code) == (400, "validation_error") and "status" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_rotation_returns_a_new_secret(self, api, world, hook):
        owner = world.owner()
        created = await register(api, owner, hook)
        rotated = (await api.post(f"/v1/webhooks/{created['id']}/rotate-secret", token=owner.token)).body
        assert rotated["secret"].startswith("whsec_") and rotated["secret"] != created["secret"]

    @pytest.mark.gen_test
    async def test_a_workspace_has_at_most_20_endpoints(self, api, world, hook):
        owner = world.owner()
        for _ in range(20):
            await register(api, owner, hook)
        r = await api.post("/v1/webhooks", {"url": hook.url()}, token=owner.token)
        assert (r.status, r.code) == (409, "too_many_webhooks")

    @pytest.mark.gen_test
    async def test_delete_then_not_found(self, api, world, hook):
        owner = world.owner()
        created = await register(api, owner, hook)
        assert (await api.delete(f"/v1/webhooks/{created['id']}", token=owner.token)).status == 204
        r = await api.delete(f"/v1/webhooks/{created['id']}", token=owner.token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_another_workspaces_endpoint_is_not_found(self, api, world, hook):
        created = await register(api, world.owner(), hook)
        other = world.owner()
        for method, path, body in [
            ("PATCH", f"/v1/webhooks/{created['id']}", {"status": "disabled"}),
            ("DELETE", f"/v1/webhooks/{created['id']}", None),
            ("POST", f"/v1/webhooks/{created['id']}/rotate-secret", None),
            ("GET", f"/v1/webhooks/{created['id']}/deliveries", None),
        ]:
            r = await api.request(method, path, json_body=body, token=other.token)
            assert (r.status, r.code) == (404, "not_found"), path
        assert (await api.get("/v1/webhooks", token=other.token)).body == []


class TestAccess:
    """Owner/admin sessions manage; a `*` key may only list."""

    @pytest.mark.gen_test
    async def test_a_star_key_lists_but_may_not_register(self, api, world, hook):
        owner = world.owner()
        key = world.key(owner.workspace, ["*"])
        assert (await api.get("/v1/webhooks", token=key)).status == 200
        r = await api.post("/v1/webhooks", {"url": hook.url()}, token=key)
        assert (r.status, r.code) == (403, "forbidden")

    @pytest.mark.gen_test
    async def test_a_star_key_may_not_change_rotate_delete_or_read_the_log(self, api, world, hook):
        owner = world.owner()
        created = await register(api, owner, hook)
        key = world.key(owner.workspace, ["*"])
        for method, path, body in [
            ("PATCH", f"/v1/webhooks/{created['id']}", {"status": "disabled"}),
            ("DELETE", f"/v1/webhooks/{created['id']}", None),
            ("POST", f"/v1/webhooks/{created['id']}/rotate-secret", None),
            ("GET", f"/v1/webhooks/{created['id']}/deliveries", None),
        ]:
            r = await api.request(method, path, json_body=body, token=key)
            assert (r.status, r.code) == (403, "forbidden"), path

    @pytest.mark.gen_test
    async def test_a_narrow_key_may_not_list(self, api, world):
        owner = world.owner()
        r = await api.get("/v1/webhooks", token=world.key(owner.workspace, ["domains:read", "certificates:read"]))
        assert (r.status, r.code) == (403, "insufficient_scope")

    @pytest.mark.gen_test
    async def test_an_admin_manages_an_operator_does_not(self, api, world, hook):
        owner = world.owner()
        admin = world.member(owner.workspace, "admin")
        operator = world.member(owner.workspace, "operator")
        assert (await api.post("/v1/webhooks", {"url": hook.url()}, token=admin.token)).status == 201
        assert (await api.post("/v1/webhooks", {"url": hook.url()}, token=operator.token)).code == "forbidden"
        assert (await api.get("/v1/webhooks", token=operator.token)).status == 200

    @pytest.mark.gen_test
    async def test_read_only_may_list_but_not_register(self, api, world, hook):
        owner = world.owner()
        reader = world.member(owner.workspace, "read_only")
        assert (await api.get("/v1/webhooks", token=reader.token)).status == 200
        assert (await api.post("/v1/webhooks", {"url": hook.url()}, token=reader.token)).code == "forbidden"


class TestUrlRules:
    """Only public HTTPS URLs, checked at registration with a reason."""

    @pytest.mark.parametrize(
        ("url", "reason"),
        [
            ("http://hooks.receiver-test.com/hook", "https"),
            ("https://user:pw@hooks.receiver-test.com/hook", "user"),
            ("https://127.0.0.1/hook", "IP address"),
            ("https://[::1]/hook", "IP address"),
            ("https://localhost/hook", "localhost"),
            ("https://hooks/hook", "single"),
            ("https://printer.local/hook", ".local"),
        ],
    )
    @pytest.mark.gen_test
    async def test_refused_forms(self, api, world, url, reason):
        r = await api.post("/v1/webhooks", {"url": url}, token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error")
        assert reason.lower() in r.body["details"]["fieldErrors"]["url"][0].lower()

    @pytest.mark.gen_test
    async def test_a_name_resolving_to_a_private_address_is_refused(self, api, world, dns):
        dns.publish("internal.corp-test.com", "A", "10.0.0.5")
        r = await api.post("/v1/webhooks", {"url": "https://internal.corp-test.com/hook"}, token=world.owner().token)
        reason = r.body["details"]["fieldErrors"]["url"][0]
        assert r.status == 400 and "non-public" in reason and "10.0.0.5" not in reason

    @pytest.mark.gen_test
    async def test_a_name_that_does_not_resolve_is_refused(self, api, world):
        r = await api.post("/v1/webhooks", {"url": "https://nowhere.corp-test.com/hook"}, token=world.owner().token)
        assert r.status == 400 and "url" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_a_changed_url_is_checked_too(self, api, world, hook, dns):
        owner = world.owner()
        created = await register(api, owner, hook)
        dns.publish("metadata.corp-test.com", "A", "169.254.169.254")
        r = await api.patch(f"/v1/webhooks/{created['id']}", {"url": "https://metadata.corp-test.com/"}, token=owner.token)
        assert r.status == 400 and "non-public" in r.body["details"]["fieldErrors"]["url"][0]


class TestDelivery:
    """Signed deliveries of the events certificates queue."""

    @pytest.mark.gen_test
    async def test_an_issuance_event_is_delivered_signed(self, api, world, hook, services, worker, clock):
        owner = world.owner()
        created = await register(api, owner, hook)
        summary = await issue_certificate(api, services, owner)
        await worker.tick()
        [got] = hook.received
        event = readme_verifier()(created["secret"], got.headers, got.body, now=clock.now().timestamp())
        assert event["type"] == "cert.issue_pending" and uuid.UUID(event["id"])
        assert event["createdAt"] == "2026-11-22T10:00:00.000Z"
        assert event["data"] == {
            "domainId": event["data"]["domainId"], "apex": "shop.example.com", "certificateId": summary["certificateId"],
            "status": "pending", "provider": "edge_provider_for_saas",
        }
        assert got.headers["X-Service-Event"] == "cert.issue_pending"
        assert got.headers["X-Service-Timestamp"] == str(int(clock.now().timestamp()))
        assert got.headers["Content-Type"] == "application/json"

    @pytest.mark.gen_test
    async def test_the_readme_verifier_refuses_a_tampered_body_and_an_old_timestamp(self, api, world, hook, services, worker, clock):
        owner = world.owner()
        created = await register(api, owner, hook)
        await issue_certificate(api, services, owner)
        await worker.tick()
        [got] = hook.received
        verify = readme_verifier()
        with pytest.raises(ValueError, match="signature"):
            verify(created["secret"], got.headers, got.body.replace(b"pending", b"active_"), now=clock.now().timestamp())
        with pytest.raises(ValueError, match="tolerance"):
            verify(created["secret"], got.headers, got.body, now=clock.now().timestamp() + 301)

    @pytest.mark.gen_test
    async def test_each_endpoint_gets_its_own_delivery_id(self, api, world, hook, services, worker):
        owner = world.owner()
        await register(api, owner, hook)
        await register(api, owner, hook)
        await issue_certificate(api, services, owner)
        await worker.tick()
        ids = {json.loads(r.body)["id"] for r in hook.received}
        assert len(hook.received) == 2 and len(ids) == 2

    @pytest.mark.gen_test
    async def test_only_subscribed_events_are_delivered(self, api, world, hook, services, worker):
        owner = world.owner()
        await register(api, owner, hook, events=["cert.issued"])
        star = await register(api, owner, hook, events=["*", "cert.issued"])
        await issue_certificate(api, services, owner)  # cert.issue_pending
        await worker.tick()
        assert len(hook.received) == 1 and len(deliveries(services, star["id"])) == 1

    @pytest.mark.gen_test
    async def test_another_workspaces_events_are_not_delivered(self, api, world, hook, services, worker):
        await register(api, world.owner(), hook)
        await issue_certificate(api, services, world.owner())
        await worker.tick()
        assert hook.received == []

    @pytest.mark.gen_test
    async def test_a_new_event_wakes_the_worker_at_once(self, api, world, hook, services, worker):
        worker.listen()  # as app.py does
        owner = world.owner()
        await register(api, owner, hook)
        await issue_certificate(api, services, owner)
        assert len(await hook.wait_for(1)) == 1  # no pass runs but the one it wakes

    @pytest.mark.gen_test
    async def test_the_endpoint_records_the_last_delivery(self, api, world, hook, services, worker, clock):
        owner = world.owner()
        created = await register(api, owner, hook)
        await issue_certificate(api, services, owner)
        await worker.tick()
        [listed] = (await api.get("/v1/webhooks", token=owner.token)).body
        assert (listed["lastDeliveryAt"], listed["lastStatusCode"]) == ("2026-11-22T10:00:00.000Z", 200)
        assert listed["id"] == created["id"]


class TestDriftEvents:
    """``[lifecycle] events = "transitions"``: drift events are subscribed to like any other."""

    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, lifecycle=attrs.evolve(config.lifecycle, events="transitions"))

    @pytest.mark.gen_test
    async def test_an_endpoint_subscribed_to_drift_detected_gets_it_and_no_certificate_event(
        self, api, world, hook, services, worker, clock
    ):
        owner = world.owner()
        created = await register(api, owner, hook, events=["domain.drift_detected"])
        d = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        mark_verified(services, d)
        await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)  # cert.issue_pending
        await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)  # no CNAME: drift
        await worker.tick()
        [got] = hook.received
        event = readme_verifier()(created["secret"], got.headers, got.body, now=clock.now().timestamp())
        assert (event["type"], event["data"]["domainId"]) == ("domain.drift_detected", d["id"])
        assert [p["code"] for p in event["data"]["drift"]] == ["delegation_missing"]

    @pytest.mark.gen_test
    async def test_the_delivery_log_shows_a_drift_delivery_as_documented(self, api, world, hook, services, worker):
        owner = world.owner()
        created = await register(api, owner, hook)
        d = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        mark_verified(services, d)
        await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)
        await worker.tick()
        page = (await api.get(f"/v1/webhooks/{created['id']}/deliveries", token=owner.token)).body  # checked against it
        assert [(i["type"], i["data"]["apex"]) for i in page["items"]] == [("domain.drift_detected", "shop.example.com")]


class TestRetries:
    """Failures are retried with backoff; every attempt is recorded."""

    @pytest.mark.gen_test
    async def test_a_failing_receiver_gets_the_same_id_with_a_new_created_at(self, api, world, hook, services, worker, clock):
        owner = world.owner()
        created = await register(api, owner, hook)
        hook.plan([500, 503, 200])
        await issue_certificate(api, services, owner)
        await worker.tick()
        for _ in range(2):
            [d] = deliveries(services, created["id"])
            clock.current = d.next_attempt_at
            await worker.tick()
        bodies = [json.loads(r.body) for r in hook.received]
        assert len(bodies) == 3 and len({b["id"] for b in bodies}) == 1
        assert len({b["createdAt"] for b in bodies}) == 3
        [d] = deliveries(services, created["id"])
        assert (d.status, d.attempt_count, d.last_status_code) == ("delivered", 3, 200)

    @pytest.mark.gen_test
    async def test_the_first_retry_is_about_30_seconds_after_the_failure(self, api, world, hook, services, worker, clock):
        owner = world.owner()
        created = await register(api, owner, hook)
        hook.respond_with(500)
        await issue_certificate(api, services, owner)
        await worker.tick()
        [d] = deliveries(services, created["id"])
        assert dt.timedelta(seconds=30) <= d.next_attempt_at - clock.now() <= dt.timedelta(seconds=36)
        clock.advance(29)
        await worker.tick()
        assert len(hook.received) == 1  # not yet due

    @pytest.mark.gen_test
    async def test_after_max_attempts_the_delivery_failed(self, api, world, hook, services, worker, clock):
        owner = world.owner()
        created = await register(api, owner, hook)
        hook.respond_with(500)
        await issue_certificate(api, services, owner)
        for _ in range(8):
            await worker.tick()
            clock.advance(3600)
        [d] = deliveries(services, created["id"])
        assert (d.status, d.attempt_count, d.next_attempt_at) == ("failed", 6, None)
        assert len(hook.received) == 6

    @pytest.mark.gen_test
    async def test_a_redirect_is_a_failure_and_is_not_followed(self, api, world, hook, services, worker):
        owner = world.owner()
        created = await register(api, owner, hook)
        hook.respond_with(302, location="https://169.254.169.254/latest/meta-data/")
        await issue_certificate(api, services, owner)
        await worker.tick()
        [d] = deliveries(services, created["id"])
        assert (d.status, d.last_status_code, d.last_error) == ("pending", 302, "The receiver answered HTTP 302.")
        assert len(hook.received) == 1

    @pytest.mark.gen_test
    async def test_a_name_that_now_resolves_privately_is_not_contacted(self, api, world, hook, services, worker, dns):
        owner = world.owner()
        created = await register(api, owner, hook)
        dns.remove(hook.hostname)
        dns.publish(hook.hostname, "A", "10.1.2.3")  # DNS changed after registration
        await issue_certificate(api, services, owner)
        await worker.tick()
        [d] = deliveries(services, created["id"])
        assert d.status == "pending" and "non-public" in d.last_error and d.last_status_code is None
        assert hook.received == []

    @pytest.mark.gen_test
    async def test_rotation_applies_to_the_next_attempt(self, api, world, hook, services, worker, clock):
        owner = world.owner()
        created = await register(api, owner, hook)
        hook.plan([500, 200])
        await issue_certificate(api, services, owner)
        await worker.tick()
        rotated = (await api.post(f"/v1/webhooks/{created['id']}/rotate-secret", token=owner.token)).body
        clock.advance(3600)
        await worker.tick()
        verify = readme_verifier()
        last = hook.received[-1]
        assert verify(rotated["secret"], last.headers, last.body, now=clock.now().timestamp())
        with pytest.raises(ValueError):
            verify(created["secret"], last.headers, last.body, now=clock.now().timestamp())


class TestBackoff:
    """The schedule, on the injected clock."""

    @pytest.fixture
    def max_attempts(self):
        return 10

    def test_delays_double_from_30_seconds_to_a_30_minute_cap_plus_jitter(self):
        rng = random.Random(1)
        for retry, base in enumerate([30, 60, 120, 240, 480, 960, 1800, 1800, 1800], start=1):
            assert base <= retry_delay(retry, rng) <= base * 1.2

    @pytest.mark.gen_test
    async def test_the_worker_follows_the_schedule_up_to_the_cap(self, api, world, hook, services, worker, clock):
        owner = world.owner()
        created = await register(api, owner, hook)
        hook.respond_with(500)
        await issue_certificate(api, services, owner)
        gaps = []
        for _ in range(9):
            await worker.tick()
            [d] = deliveries(services, created["id"])
            gaps.append((d.next_attempt_at - clock.now()).total_seconds())
            clock.current = d.next_attempt_at
        for gap, base in zip(gaps, [30, 60, 120, 240, 480, 960, 1800, 1800, 1800]):
            assert base <= gap <= base * 1.2


class TestDisableAndDelete:
    """Queued deliveries wait while disabled, and go with a deleted endpoint."""

    @pytest.mark.gen_test
    async def test_a_disabled_endpoint_gets_no_new_deliveries(self, api, world, hook, services, worker):
        owner = world.owner()
        created = await register(api, owner, hook)
        await api.patch(f"/v1/webhooks/{created['id']}", {"status": "disabled"}, token=owner.token)
        await issue_certificate(api, services, owner)
        await worker.tick()
        assert deliveries(services, created["id"]) == [] and hook.received == []

    @pytest.mark.gen_test
    async def test_queued_deliveries_wait_and_resume_on_enabling(self, api, world, hook, services, worker):
        owner = world.owner()
        created = await register(api, owner, hook)
        await issue_certificate(api, services, owner)
        worker.fan_out()
        await api.patch(f"/v1/webhooks/{created['id']}", {"status": "disabled"}, token=owner.token)
        await worker.tick()
        assert hook.received == []
        await api.patch(f"/v1/webhooks/{created['id']}", {"status": "active"}, token=owner.token)
        await worker.tick()
        assert len(hook.received) == 1

    @pytest.mark.gen_test
    async def test_deleting_removes_queued_deliveries(self, api, world, hook, services, worker):
        owner = world.owner()
        created = await register(api, owner, hook)
        await issue_certificate(api, services, owner)
        worker.fan_out()
        await api.delete(f"/v1/webhooks/{created['id']}", token=owner.token)
        assert deliveries(services, created["id"]) == []
        await worker.tick()
        assert hook.received == []


class TestChangesWhileSending:
    """Deliveries waiting for a send slot, or in flight, meet the endpoint as it is now."""

    @pytest.mark.gen_test
    async def test_disabling_stops_deliveries_still_waiting_for_a_slot(self, api, world, hook, services):
        owner = world.owner()
        created = await register(api, owner, hook)
        for n in range(3):
            await issue_certificate(api, services, owner, apex=f"h{n}.example.com")
        hook.respond_with(200, delay=0.3)
        worker = WebhookWorker(services, concurrency=1)
        run = asyncio.ensure_future(worker.tick())
        await hook.wait_for(1)
        await api.patch(f"/v1/webhooks/{created['id']}", {"status": "disabled"}, token=owner.token)
        await run
        assert len(hook.received) == 1
        assert sorted(d.status for d in deliveries(services, created["id"])) == ["delivered", "pending", "pending"]

    @pytest.mark.gen_test
    async def test_a_redelivery_asked_for_during_an_attempt_is_kept(self, api, world, hook, services, worker):
        owner = world.owner()
        created = await register(api, owner, hook)
        await issue_certificate(api, services, owner)
        hook.respond_with(200, delay=0.3)
        run = asyncio.ensure_future(worker.tick())
        await hook.wait_for(1)
        [d] = deliveries(services, created["id"])
        await api.post(f"/v1/webhooks/{created['id']}/deliveries/{d.id}/redeliver", token=owner.token)
        await run
        [d] = deliveries(services, created["id"])
        assert (d.status, d.attempt_count) == ("pending", 0)  # the new round stands
        await worker.tick()
        assert len(hook.received) == 2


class TestDeliveryLog:
    """The delivery log and redelivery."""

    @pytest.mark.gen_test
    async def test_the_log_lists_deliveries_and_their_attempts(self, api, world, hook, services, worker, clock):
        owner = world.owner()
        created = await register(api, owner, hook)
        hook.plan([500, 200])
        await issue_certificate(api, services, owner)
        await worker.tick()
        clock.advance(3600)
        await worker.tick()
        page = (await api.get(f"/v1/webhooks/{created['id']}/deliveries", token=owner.token)).body
        [item] = page["items"]
        assert (page["total"], item["status"], item["attemptCount"], item["type"]) == (1, "delivered", 2, "cert.issue_pending")
        detail = (await api.get(f"/v1/webhooks/{created['id']}/deliveries/{item['id']}", token=owner.token)).body
        assert [(a["number"], a.get("statusCode")) for a in detail["attempts"]] == [(1, 500), (2, 200)]
        assert detail["attempts"][0]["error"] == "The receiver answered HTTP 500."

    @pytest.mark.gen_test
    async def test_the_log_pages_by_cursor(self, api, world, hook, services, worker, clock):
        owner = world.owner()
        created = await register(api, owner, hook)
        for n in range(3):
            await issue_certificate(api, services, owner, apex=f"h{n}.example.com")
            clock.advance(1)
        await worker.tick()
        path = f"/v1/webhooks/{created['id']}/deliveries"
        first = (await api.get(f"{path}?limit=2", token=owner.token)).body
        rest = (await api.get(f"{path}?limit=2&cursor={first['nextCursor']}", token=owner.token)).body
        assert len(first["items"]) == 2 and len(rest["items"]) == 1 and "nextCursor" not in rest
        for odd in ("0", "%C2%B2", "9" * 5000, "-1", "1.5"):  # "²" passes str.isdigit() but not int()
            assert (await api.get(f"{path}?limit={odd}", token=owner.token)).code == "validation_error", odd

    @pytest.mark.gen_test
    async def test_redelivery_sends_the_same_id_again(self, api, world, hook, services, worker):
        owner = world.owner()
        created = await register(api, owner, hook)
        await issue_certificate(api, services, owner)
        await worker.tick()
        [d] = deliveries(services, created["id"])
        r = await api.post(f"/v1/webhooks/{created['id']}/deliveries/{d.id}/redeliver", token=owner.token)
        assert (r.status, r.body["status"], r.body["id"]) == (202, "pending", str(d.id))
        await worker.tick()
        assert [json.loads(x.body)["id"] for x in hook.received] == [str(d.id), str(d.id)]

    @pytest.mark.gen_test
    async def test_an_unknown_delivery_is_not_found(self, api, world, hook):
        owner = world.owner()
        created = await register(api, owner, hook)
        r = await api.get(f"/v1/webhooks/{created['id']}/deliveries/{uuid.uuid4()}", token=owner.token)
        assert (r.status, r.code) == (404, "not_found")
