"""Certificates with ``[provider] kind = "cloudflare"``, through the API, against the fake
Cloudflare API on loopback (tests/servers/cloudflare.py) and the real DNS test server."""

from __future__ import annotations

import asyncio
import uuid

import attrs
import pytest

from core.config import CloudflareConfig, ProviderConfig
from tests.helpers import mark_active, mark_verified
from tests.patience import PATIENCE_SECONDS
from tests.servers.cloudflare import TOKEN, ZONE_ID, FakeCloudflare

APEX = "shop.example.com"
#: A new hostname's validation, as the provider reports it timed out.
TIMED_OUT = {"ssl_status": "validation_timed_out", "ssl_errors": ["caa_error: no CAA record allows google"]}


@pytest.fixture(scope="module")
def fake():
    server = FakeCloudflare().start()
    yield server
    server.stop()


@pytest.fixture
def cloudflare(fake):
    fake.reset()
    return fake


@pytest.fixture
def budget():
    """Requests per window the service allows itself; classes override it."""
    return 1200


@pytest.fixture
def workspace_share():
    """``[provider] workspace_share``: the default; classes override it."""
    return ProviderConfig().workspace_share


@pytest.fixture
def provider_timeout():
    """``[provider.cloudflare] timeout_seconds``: short, so a provider down fails fast; classes override it."""
    return 1


@pytest.fixture
def config(config, cloudflare, budget, workspace_share, provider_timeout):
    cf = CloudflareConfig(
        api_base=cloudflare.api_base, zone_id=ZONE_ID, api_token=TOKEN,
        timeout_seconds=provider_timeout, retry_seconds=1, requests_per_window=budget, window_seconds=60,
    )
    return attrs.evolve(config, provider=ProviderConfig(kind="cloudflare", cloudflare=cf, workspace_share=workspace_share))


async def verified(api, world, dns, apex=APEX):
    owner = world.owner()
    d = (await api.post("/v1/domains", {"apex": apex}, token=owner.token)).body
    dns.publish(f"_acme-challenge.{apex}", "CNAME", d["validation"]["delegation"]["value"])
    dns.publish(f"_service-verify.{apex}", "TXT", d["validation"]["ownership"]["value"])
    return owner, d


async def marked_verified(api, world, services, apex=APEX):
    """A domain marked verified without the verification call (which would issue by itself)."""
    owner = world.owner()
    d = (await api.post("/v1/domains", {"apex": apex}, token=owner.token)).body
    mark_verified(services, d)
    return owner, d


async def issue(api, owner, d, body=None, **kw):
    return await api.post(f"/v1/domains/{d['id']}/certificates/issue", body if body is not None else {}, token=owner.token, **kw)


def event_types(services, owner):
    return [e.type for e in services.store.outbox.for_workspace(owner.workspace.id)]


class TestFlow:
    """Sign-up to active, the Cloudflare way."""

    @pytest.mark.gen_test
    async def test_verify_creates_the_custom_hostname_and_refresh_activates_it(self, api, world, dns, cloudflare):
        owner, d = await verified(api, world, dns)
        r = await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)
        assert (r.body["status"], r.body["certificate"]["status"]) == ("verified", "pending")
        cloudflare.set_state(APEX, status="active", ssl_status="active")
        summary = (await api.post(f"/v1/certificates/{r.body['certificate']['certificateId']}/refresh", token=owner.token)).body
        assert summary["status"] == "active"
        c = (await api.get(f"/v1/certificates/{summary['certificateId']}", token=owner.token)).body
        record = cloudflare.find(APEX)
        assert c["providerHostnameId"] == record["id"] and c["providerSslId"] == record["ssl"]["id"]
        assert c["providerCertificateId"] == record["ssl"]["certificates"][0]["id"]
        assert (c["issuer"], c["providerStatus"], c["providerHostnameStatus"]) == ("LetsEncrypt", "active", "active")
        assert c["notAfter"][:10] == record["ssl"]["certificates"][0]["expires_on"][:10]
        domain = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert (domain["cert"]["status"], domain["opsStatus"], domain["cert"]["issuer"]) == ("active", "active", "LetsEncrypt")

    @pytest.mark.gen_test
    async def test_only_hostname_method_and_type_are_sent(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        await issue(api, owner, d, {"ca": "digicert", "chain": "long", "wildcard": False})
        posts = [body for method, path, body in cloudflare.bodies if method == "POST"]
        assert posts == [{"hostname": APEX, "ssl": {"method": "txt", "type": "dv"}}]

    @pytest.mark.gen_test
    async def test_reading_a_certificate_never_contacts_the_provider(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        summary = (await issue(api, owner, d)).body
        before = len(cloudflare.requests)
        await api.get(f"/v1/certificates/{summary['certificateId']}", token=owner.token)
        await api.post(f"/v1/domains/{d['id']}/certificates/query", {}, token=owner.token)
        await api.get(f"/v1/certificates/{summary['certificateId']}/bundle", token=owner.token)
        assert len(cloudflare.requests) == before

    @pytest.mark.gen_test
    async def test_an_existing_custom_hostname_is_adopted(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        cloudflare.auto_activate = True
        first = (await issue(api, owner, d)).body  # created, and active at once
        services.store.certificates.update(  # forget what we learnt: the next request finds a duplicate
            attrs.evolve(services.store.certificates.get(owner.workspace.id, uuid.UUID(first["certificateId"])), status="error")
        )
        again = await issue(api, owner, d)
        assert again.body["status"] == "active"
        c = (await api.get(f"/v1/certificates/{again.body['certificateId']}", token=owner.token)).body
        assert c["providerHostnameId"] == cloudflare.find(APEX)["id"]
        assert len(cloudflare.hostnames) == 1

    @pytest.mark.gen_test
    async def test_a_refresh_stores_a_timed_out_validation_as_the_error_it_is(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        summary = (await issue(api, owner, d)).body
        cloudflare.set_state(APEX, ssl_status="validation_timed_out", ssl_errors=["CAA record forbids issuance"])
        r = await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=owner.token)
        assert (r.body["status"], cloudflare.revalidations) == ("error", 0)
        assert "CAA record forbids issuance" in r.body["message"]
        domain = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert (domain["cert"]["status"], domain["opsStatus"]) == ("error", "action_needed")
        assert event_types(services, owner) == ["cert.issue_pending"]  # no event for a refresh (spec)

    @pytest.mark.gen_test
    async def test_an_issue_that_finds_a_timed_out_hostname_stores_the_failure_and_its_event(
        self, api, world, services, cloudflare
    ):
        owner, d = await marked_verified(api, world, services)
        first = (await issue(api, owner, d)).body
        cloudflare.set_state(APEX, ssl_status="validation_timed_out", ssl_errors=["CAA record forbids issuance"])
        services.store.certificates.update(  # forgotten: the next request adopts the provider's hostname
            attrs.evolve(services.store.certificates.get(owner.workspace.id, uuid.UUID(first["certificateId"])), status="error")
        )
        again = (await issue(api, owner, d)).body
        assert (again["status"], cloudflare.revalidations) == ("error", 0)
        assert sorted(event_types(services, owner)) == ["cert.issue_failed", "cert.issue_pending"]

    @pytest.mark.gen_test
    async def test_a_check_that_finds_both_records_validates_a_timed_out_hostname_again(
        self, api, world, dns, cloudflare
    ):
        owner, d = await verified(api, world, dns)
        first = (await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)).body
        cloudflare.set_state(APEX, ssl_status="validation_timed_out")
        await api.post(f"/v1/certificates/{first['certificate']['certificateId']}/refresh", token=owner.token)
        r = (await api.post(f"/v1/domains/{d['id']}/recheck", token=owner.token)).body
        assert (r["certStatus"], cloudflare.revalidations) == ("pending", 1)

    @pytest.mark.gen_test
    async def test_issuing_during_a_renewal_reports_renewing(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        cloudflare.auto_activate = True
        first = (await issue(api, owner, d)).body
        cloudflare.set_state(APEX, ssl_status="pending_deployment")  # the provider renews
        await api.post(f"/v1/certificates/{first['certificateId']}/refresh", token=owner.token)
        again = (await issue(api, owner, d)).body
        assert (again["certificateId"], again["status"]) == (first["certificateId"], "pending")
        domain = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert (domain["cert"]["status"], domain["opsStatus"]) == ("renewing", "active")

    @pytest.mark.gen_test
    async def test_validation_errors_reach_the_message(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        summary = (await issue(api, owner, d)).body
        cloudflare.set_state(APEX, ssl_status="pending_validation", ssl_errors=["caa_error: no CAA record allows google"])
        r = await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=owner.token)
        assert "caa_error: no CAA record allows google" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_hostname_deleted_at_the_provider_fails_the_certificate(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        summary = (await issue(api, owner, d)).body
        cloudflare.hostnames.clear()
        r = await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=owner.token)
        assert r.body["status"] == "error" and "no longer has this hostname" in r.body["message"]
        assert event_types(services, owner) == ["cert.issue_pending"]


def patches(cloudflare):
    return [method for method, _ in cloudflare.requests].count("PATCH")


class TestFirstAnswerStoredAsReported:
    """A new hostname whose validation the provider reports timed out (spec, States and transitions:
    a result reporting an error is ``error``, with ``cert.issue_failed``); only a later check that
    finds the records asks the provider to validate again."""

    async def verify(self, api, owner, d):
        return (await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)).body

    @pytest.mark.gen_test
    async def test_verify_stores_the_timed_out_answer_as_error_with_one_event_and_no_patch(
        self, api, world, services, dns, cloudflare
    ):
        owner, d = await verified(api, world, dns)
        cloudflare.created_as = TIMED_OUT
        r = await self.verify(api, owner, d)
        assert r["certificate"]["status"] == "error" and "caa_error" in r["certificate"]["message"]
        c = (await api.get(f"/v1/certificates/{r['certificate']['certificateId']}", token=owner.token)).body
        domain = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert (c["status"], domain["cert"]["status"], domain["opsStatus"]) == ("error", "error", "action_needed")
        assert event_types(services, owner) == ["cert.issue_failed"]
        assert patches(cloudflare) == 0

    @pytest.mark.gen_test
    async def test_a_later_verify_validates_it_again_with_a_patch_and_stores_the_answer(
        self, api, world, services, dns, cloudflare
    ):
        owner, d = await verified(api, world, dns)
        cloudflare.created_as = TIMED_OUT
        await self.verify(api, owner, d)
        r = await self.verify(api, owner, d)
        assert patches(cloudflare) == 1
        c = (await api.get(f"/v1/certificates/{r['certificate']['certificateId']}", token=owner.token)).body
        domain = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert (c["providerStatus"], c["status"], domain["cert"]["status"]) == ("pending_validation", "pending", "pending")
        assert sorted(event_types(services, owner)) == ["cert.issue_failed", "cert.issue_pending"]  # asking again: a request

    @pytest.mark.gen_test
    async def test_a_later_verify_only_reads_a_hostname_the_provider_validates_again_by_itself(
        self, api, world, services, dns, cloudflare
    ):
        owner, d = await verified(api, world, dns)
        cloudflare.created_as = TIMED_OUT
        await self.verify(api, owner, d)
        cloudflare.set_state(APEX, status="active", ssl_status="active")
        r = await self.verify(api, owner, d)
        assert (r["certificate"]["status"], patches(cloudflare)) == ("active", 0)
        assert event_types(services, owner) == ["cert.issue_failed"]  # nothing was asked: a refresh (spec)

    @pytest.mark.gen_test
    async def test_issue_stores_the_timed_out_answer_as_error_with_one_event_and_no_patch(
        self, api, world, services, cloudflare
    ):
        owner, d = await marked_verified(api, world, services)
        cloudflare.created_as = TIMED_OUT
        r = (await issue(api, owner, d)).body
        domain = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert (r["status"], domain["cert"]["status"]) == ("error", "error")
        assert event_types(services, owner) == ["cert.issue_failed"]
        assert patches(cloudflare) == 0


class TestProviderRefusals:
    """A refusal about the hostname is a stored result; no result is not."""

    @pytest.mark.gen_test
    async def test_a_quota_refusal_is_a_failed_certificate_with_its_event(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        cloudflare.max_hostnames = 0
        r = await issue(api, owner, d)
        assert r.status == 200 and r.body["status"] == "error"
        assert "Cloudflare error 1405" in r.body["message"]
        assert event_types(services, owner) == ["cert.issue_failed"]
        domain = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert domain["cert"]["lastError"] == r.body["message"] and domain["opsStatus"] == "action_needed"

    @pytest.mark.gen_test
    async def test_a_provider_down_is_502_with_only_the_domain_error_written(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        cloudflare.fail_next(10, status=503)
        r = await issue(api, owner, d, headers={"Idempotency-Key": "down"})
        assert (r.status, r.code) == (502, "upstream_error")
        assert event_types(services, owner) == []
        assert services.store.certificates.latest(owner.workspace.id, uuid.UUID(d["id"])) is None
        domain = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert domain["cert"]["status"] == "none" and "HTTP 503" in domain["cert"]["lastError"]
        assert uuid.UUID(domain["cert"]["traceId"])
        cloudflare.reset()
        assert (await issue(api, owner, d, headers={"Idempotency-Key": "down"})).status == 200  # the key was released

    @pytest.mark.gen_test
    async def test_verify_answers_200_when_the_provider_is_down(self, api, world, dns, cloudflare):
        owner, d = await verified(api, world, dns)
        await api.get(f"/v1/domains/{d['id']}", token=owner.token)
        cloudflare.fail_next(10, status=500)
        r = await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)
        assert r.status == 200 and r.body["status"] == "verified" and "certificate" not in r.body
        assert "Certificate issuance could not proceed" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_transient_failure_is_retried(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        cloudflare.fail_next(1, status=500)
        assert (await issue(api, owner, d)).body["status"] == "pending"


class TestIdempotencyWhileTheProviderIsHeld:
    """Two requests with one key, the second while the first waits on the provider."""

    @pytest.fixture
    def provider_timeout(self):
        return PATIENCE_SECONDS  # the first request waits on the held provider while the second is answered

    @staticmethod
    async def both(api, owner, d, cloudflare):
        """The first request's answer and the second's, sent while the provider holds the first."""
        cloudflare.hold()
        first = asyncio.ensure_future(issue(api, owner, d, headers={"Idempotency-Key": "slow"}))
        await cloudflare.wait_until_held()
        second = await issue(api, owner, d, headers={"Idempotency-Key": "slow"})
        cloudflare.release()
        return await first, second

    @pytest.mark.gen_test
    async def test_the_second_is_in_progress_and_one_request_reaches_the_provider(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        first, second = await self.both(api, owner, d, cloudflare)
        assert (first.status, second.status, second.code) == (200, 409, "idempotency_in_progress")
        assert [m for m, _ in cloudflare.requests].count("POST") == 1
        assert event_types(services, owner) == ["cert.issue_pending"]

    @pytest.mark.gen_test
    async def test_the_key_replays_once_the_first_has_answered(self, api, world, services, cloudflare):
        owner, d = await marked_verified(api, world, services)
        await self.both(api, owner, d, cloudflare)
        replay = await issue(api, owner, d, headers={"Idempotency-Key": "slow"})
        assert replay.headers.get("Idempotent-Replayed") == "true"
        assert [m for m, _ in cloudflare.requests].count("POST") == 1


class TestPacing:
    """A small budget: a burst is cut at the budget with a clear answer, never a provider 429."""

    @pytest.fixture
    def budget(self):
        return 5

    @pytest.fixture
    def workspace_share(self):
        return 1.0  # one workspace may spend it all: the budget itself is what is tested here

    @pytest.mark.gen_test
    async def test_a_burst_past_the_budget_gets_503_with_retry_after_and_stores_nothing(self, api, world, services, cloudflare):
        owner = world.owner()
        ds = []
        for n in range(8):  # the sandbox-free create needs the delegation id: one call, cached
            d = (await api.post("/v1/domains", {"apex": f"h{n}.example.com"}, token=owner.token)).body
            mark_verified(services, d)
            ds.append(d)
        results = await asyncio.gather(*(issue(api, owner, d) for d in ds))
        statuses = sorted(r.status for r in results)
        assert statuses == [200] * 4 + [503] * 4  # 1 delegation-id call + 4 creates = the budget of 5
        busy = [r for r in results if r.status == 503]
        assert all(r.code == "provider_busy" and 50 <= int(r.headers["Retry-After"]) <= 60 for r in busy)
        assert 429 not in cloudflare.statuses
        assert len(event_types(services, owner)) == 4
        assert sum(services.store.certificates.count(owner.workspace.id, uuid.UUID(d["id"])) for d in ds) == 4

    @pytest.mark.gen_test
    async def test_the_providers_own_ratelimit_header_is_obeyed(self, api, world, services, cloudflare):
        cloudflare.quota = 2  # the provider says: 2 left in this window (another client spent the rest)
        owner, d = await marked_verified(api, world, services)
        assert (await issue(api, owner, d)).status == 200  # call 2 of 2: Ratelimit r=0
        r = await issue(api, owner, d)
        assert (r.status, r.code) == (503, "provider_busy")
        assert 429 not in cloudflare.statuses


class TestFairShare:
    """A budget of 20 calls a window for every tenant: one workspace flooding it is held back at its
    share, which grows with its verified, active hostnames (a new workspace's: 1 call; one for each
    such hostname; at most a quarter: 5), and the others' calls in the same window still go through."""

    @pytest.fixture
    def budget(self):
        return 20

    @pytest.mark.gen_test
    async def test_a_workspace_flooding_refresh_is_held_back_and_another_still_issues(self, api, world, services, cloudflare):
        flooder, d = await marked_verified(api, world, services)
        for n in range(2):  # two hostnames verified and serving: 1 + 2 calls
            active = (await api.post("/v1/domains", {"apex": f"live{n}.example.com"}, token=flooder.token)).body
            mark_active(services, active)
        summary = (await issue(api, flooder, d)).body  # its first call
        refresh = f"/v1/certificates/{summary['certificateId']}/refresh"
        flood = await asyncio.gather(*(api.post(refresh, token=flooder.token) for _ in range(30)))
        assert sorted(r.status for r in flood) == [200] * 2 + [503] * 28
        held = [r for r in flood if r.status == 503]
        assert all(r.code == "provider_busy" and 50 <= int(r.headers["Retry-After"]) <= 60 for r in held)
        assert held[0].body["message"].startswith("This workspace has used its share")

        quiet, other = await marked_verified(api, world, services, apex="quiet.example.net")
        r = await issue(api, quiet, other)
        assert (r.status, r.body["status"]) == (200, "pending")
        assert cloudflare.find("quiet.example.net") is not None
        assert len(cloudflare.requests) == 1 + 3 + 1  # the delegation id, the flooder's share, the issuance
        assert 429 not in cloudflare.statuses


class TestManyWorkspacesOfOnePerson:
    """Sign-up is public and needs only a hostname its creator controls: six workspaces opened by one
    person (one e-mail address each) take no more of a budget of 30 calls than their hostnames
    earn, however many they open, and a quiet tenant is still served."""

    @pytest.fixture
    def budget(self):
        return 30

    @pytest.mark.gen_test
    async def test_six_workspaces_of_one_person_flooding_leave_a_quiet_workspace_served(
            self, api, world, services, cloudflare):
        quiet = world.owner("quiet@tenant-quiet.com")
        pending = []
        for n in range(5):  # five hostnames serving certificates; five more to issue for
            made = (await api.post("/v1/domains", {"apex": f"www{n}.tenant-quiet.com"}, token=quiet.token)).body
            mark_active(services, made)
            made = (await api.post("/v1/domains", {"apex": f"shop{n}.tenant-quiet.com"}, token=quiet.token)).body
            mark_verified(services, made)
            pending.append(made)

        async def flood(n: int) -> list[int]:
            owner = world.owner(f"mallory+{n}@flood.example.com")
            d = (await api.post("/v1/domains", {"apex": f"www.flood{n}.example.com"}, token=owner.token)).body
            mark_verified(services, d)
            first = await issue(api, owner, d)
            refresh = f"/v1/certificates/{first.body['certificateId']}/refresh"
            again = await asyncio.gather(*(api.post(refresh, token=owner.token) for _ in range(8)))
            return [first.status] + [r.status for r in again]

        flooded = await asyncio.gather(*(flood(n) for n in range(6)))
        served = [await issue(api, quiet, d) for d in pending]
        assert [(r.status, r.body["status"]) for r in served] == [(200, "pending")] * 5
        assert [statuses.count(200) for statuses in flooded] == [1] * 6  # a new workspace's share each
        assert len(cloudflare.requests) == 1 + 6 + 5  # the delegation id, the six's, the quiet one's
        assert 429 not in cloudflare.statuses
