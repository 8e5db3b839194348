"""Verification drives issuance: verify-delegation and recheck start or check it, and the
development-only simulated DNS lets the whole flow run without owning a domain."""

from __future__ import annotations

import uuid

import attrs
import pytest

from core.config import Config, ConfigError, ProviderConfig, SandboxConfig, config_from_dict


async def domain_with_records(api, world, dns, apex="shop.example.com"):
    owner = world.owner()
    d = (await api.post("/v1/domains", {"apex": apex}, token=owner.token)).body
    dns.publish(f"_acme-challenge.{apex}", "CNAME", d["validation"]["delegation"]["value"])
    dns.publish(f"_service-verify.{apex}", "TXT", d["validation"]["ownership"]["value"])
    return owner, d


async def verify(api, owner, d):
    return await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)


async def recheck(api, owner, d):
    return await api.post(f"/v1/domains/{d['id']}/recheck", token=owner.token)


class TestVerifyStartsIssuance:
    """verify-delegation with both records found."""

    @pytest.mark.gen_test
    async def test_the_result_carries_the_issuance_summary(self, api, world, dns):
        owner, d = await domain_with_records(api, world, dns)
        r = await verify(api, owner, d)
        assert r.body["status"] == "verified"
        assert r.body["certificate"]["status"] == "pending"
        assert "issuing the certificate" in r.body["message"]

    @pytest.mark.gen_test
    async def test_verifying_again_checks_the_same_certificate(self, api, world, dns, services, clock):
        owner, d = await domain_with_records(api, world, dns)
        first = (await verify(api, owner, d)).body["certificate"]
        clock.advance(10)
        second = (await verify(api, owner, d)).body["certificate"]
        assert (second["certificateId"], second["status"]) == (first["certificateId"], "active")
        # The check was a refresh: only the first request queued an event.
        assert [e.type for e in services.store.outbox.for_workspace(owner.workspace.id)] == ["cert.issue_pending"]

    @pytest.mark.gen_test
    async def test_an_active_domain_gets_no_certificate_summary(self, api, world, dns, clock):
        owner, d = await domain_with_records(api, world, dns)
        await verify(api, owner, d)
        clock.advance(10)
        await verify(api, owner, d)
        r = await verify(api, owner, d)
        assert r.body["status"] == "verified" and "certificate" not in r.body

    @pytest.mark.gen_test
    async def test_pending_dns_starts_nothing(self, api, world, services):
        owner = world.owner()
        d = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        r = await verify(api, owner, d)
        assert r.body["status"] == "pending" and "certificate" not in r.body
        assert services.store.certificates.latest(owner.workspace.id, uuid.UUID(d["id"])) is None

    @pytest.mark.gen_test
    async def test_a_caa_block_is_reported_in_the_result(self, api, world, dns):
        owner, d = await domain_with_records(api, world, dns)
        dns.publish_caa("example.com", "issue", "digicert.com")
        r = await verify(api, owner, d)
        assert r.body["certificate"]["status"] == "error"
        assert 'example.com. CAA 0 issue "letsencrypt.org"' in r.body["message"]
        after = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert after["cert"]["status"] == "error" and "CAA" in after["cert"]["lastError"]


class TestRecheck:
    """recheck: DNS, then issuance started, checked or refreshed."""

    @pytest.mark.gen_test
    async def test_recheck_brings_the_certificate_to_active(self, api, world, dns, clock):
        owner, d = await domain_with_records(api, world, dns)
        assert (await recheck(api, owner, d)).body["certStatus"] == "pending"
        clock.advance(10)
        r = await recheck(api, owner, d)
        assert (r.body["status"], r.body["certStatus"]) == ("active", "active")

    @pytest.mark.gen_test
    async def test_recheck_refreshes_an_active_certificate_even_when_dns_broke(self, api, world, dns, clock, services):
        owner, d = await domain_with_records(api, world, dns)
        await recheck(api, owner, d)
        clock.advance(10)
        await recheck(api, owner, d)
        dns.remove("_acme-challenge.shop.example.com")
        clock.advance(60)
        r = await recheck(api, owner, d)
        assert r.body["certStatus"] == "active"
        c = services.store.certificates.latest(owner.workspace.id, uuid.UUID(d["id"]))
        assert c.last_checked_at == clock.now()


@pytest.fixture
def simulated(config):
    sandbox = SandboxConfig(simulate_dns=True, simulate_dns_delay_seconds=5, activation_delay_seconds=10)
    return attrs.evolve(config, provider=ProviderConfig(kind="sandbox", sandbox=sandbox))


class TestSimulatedDns:
    """[provider.sandbox] simulate_dns: development only."""

    @pytest.fixture
    def config(self, simulated):
        return simulated

    @pytest.mark.gen_test
    async def test_records_appear_after_the_delay_and_the_certificate_activates(self, api, world, clock):
        owner = world.owner()
        d = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        assert (await verify(api, owner, d)).body["status"] == "pending"
        clock.advance(5)
        r = await verify(api, owner, d)
        assert (r.body["status"], r.body["certificate"]["status"]) == ("verified", "pending")
        clock.advance(10)
        assert (await recheck(api, owner, d)).body == {
            "status": "active", "checkedAt": "2026-11-22T10:00:15.000Z", "certStatus": "active"
        }

    def test_it_cannot_be_turned_on_with_cloudflare(self):
        with pytest.raises(ConfigError, match="simulate_dns"):
            config_from_dict(
                {
                    "provider": {
                        "kind": "cloudflare",
                        "cloudflare": {"zone_id": "z", "api_token": "t"},
                        "sandbox": {"simulate_dns": True},
                    }
                }
            )

    def test_it_is_off_by_default(self):
        assert Config().provider.sandbox.simulate_dns is False
