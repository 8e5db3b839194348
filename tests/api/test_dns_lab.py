"""Verification and diagnosis against real DNS software: NSD serving the zones, Unbound resolving
and validating (tests/servers/dns_lab.py). These are the cases a fake server cannot show, found by
the second review (items 21 to 24): a resolver's caches, negative and positive, and DNSSEC.

Every test uses names of its own: Unbound's cache lives as long as the module's lab. Each backend
the tests run on has its own lab, since a test run on both uses its names twice.
"""

from __future__ import annotations

import datetime as dt
import uuid

import attrs
import pytest

from core.certificates import caa
from core.clock import by_minute
from core.config import DnsConfig
from core.lifecycle.watcher import LifecycleWatcher
from tests.servers.dns_lab import SIGNED, SOA_MINIMUM, DnsLab, missing_tools

pytestmark = pytest.mark.skipif(bool(missing_tools()), reason=f"needs {', '.join(missing_tools())} (Debian packages "
                                "nsd, unbound, ldnsutils; .ci/run installs them)")


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    """The module's labs, one per backend, started when first needed."""
    started: dict[str, DnsLab] = {}

    def lab_for(backend: str) -> DnsLab:
        if backend not in started:
            lab = DnsLab(tmp_path_factory.mktemp("dns-lab"))
            lab.records[SIGNED] += _records_of("shop", SIGNED)
            started[backend] = lab.start()
        return started[backend]

    yield lab_for
    for lab in started.values():
        lab.stop()


@pytest.fixture
def lab(labs, backend):
    return labs("postgresql" if backend else "sqlite")


def _records_of(label, zone):
    """Placeholder records at a name, so the signed zone has them from the start (values do not matter:
    no resolver will validate them)."""
    return [f"_acme-challenge.{label}.{zone}. 300 IN CNAME target.example.net.",
            f'_service-verify.{label}.{zone}. 300 IN TXT "service-domain-verification=x"']


@pytest.fixture
def config(config, lab):
    """Unbound as the service's resolver; NSD on 127.0.0.1, which the diagnosis may dial only
    because ``allow_private_ranges`` says so."""
    return attrs.evolve(config, dns=DnsConfig(nameservers=[lab.resolver], timeout_seconds=2),
                        network=attrs.evolve(config.network, allow_private_ranges=["127.0.0.1/32"]))


@pytest.fixture
def services(services, lab):
    services.authority.port = lab.nsd_port
    return services


def publish_both(lab, created, zone="lab.com"):
    apex = created["apex"]
    lab.publish(zone, f"_acme-challenge.{apex}. 300 IN CNAME {created['validation']['delegation']['value']}.")
    lab.publish(zone, f'_service-verify.{apex}. 300 IN TXT "{created["validation"]["ownership"]["value"]}"')


async def add(api, owner, apex):
    r = await api.post("/v1/domains", {"apex": apex}, token=owner.token)
    assert r.status == 201, r.body
    return r.body


async def verify(api, owner, created):
    r = await api.post(f"/v1/domains/{created['id']}/verify-delegation", token=owner.token)
    assert r.status == 200, r.body
    return r.body


async def diagnose(api, owner, created):
    r = await api.get(f"/v1/domains/{created['id']}/diagnosis", token=owner.token)
    assert r.status == 200, r.body
    return r.body


def finding(report, code):
    [found] = [f for f in report["findings"] if f["code"] == code]
    return found


class TestExpiredDnssecSignatures:
    """Item 21: ``expired.com`` is signed, its signatures expired, and Unbound trusts its key."""

    @pytest.mark.gen_test
    async def test_verification_names_dnssec_and_the_fix(self, api, world):
        owner = world.owner()
        created = await add(api, owner, f"shop.{SIGNED}")
        result = await verify(api, owner, created)
        assert result["status"] == "error"
        assert f"DNSSEC validation fails for _acme-challenge.shop.{SIGNED}" in result["message"]
        assert "re-sign the zone, or remove the DS record at the registrar" in result["message"]

    @pytest.mark.gen_test
    async def test_a_domain_with_broken_dnssec_is_not_handed_to_the_provider(self, api, world, services):
        owner = world.owner()
        created = await add(api, owner, f"shop.{SIGNED}")
        await verify(api, owner, created)
        assert services.store.certificates.latest(owner.workspace.id, uuid.UUID(created["id"])) is None

    @pytest.mark.gen_test
    async def test_the_caa_preflight_refuses_a_zone_whose_dnssec_fails(self, services):
        verdict = await caa.preflight(services.dns, f"shop.{SIGNED}", ["letsencrypt.org"])
        assert (verdict.allowed, verdict.dnssec) == (False, True)
        assert "is not handed to the edge provider" in (verdict.message or "")

    @pytest.mark.gen_test
    async def test_the_diagnosis_finds_the_zone_and_names_dnssec(self, api, world):
        owner = world.owner()
        created = await add(api, owner, f"shop.{SIGNED}")
        report = await diagnose(api, owner, created)
        assert report["zone"] == SIGNED and report["verdict"] == "action_needed"
        found = finding(report, "dnssec_failure")
        assert found["severity"] == "error" and f"The zone {SIGNED} fails DNSSEC validation" in found["message"]
        assert "authority_unknown" not in [f["code"] for f in report["findings"]]
        [cname] = [r for r in report["records"] if r["purpose"] == "delegation"]
        assert [a["outcome"] for a in cname["answers"]] == ["found", "error"]  # the zone has it; the resolver refuses it


class TestNegativeCaching:
    """Item 23: checked before publishing, so Unbound caches "no such record" for the SOA minimum."""

    @pytest.mark.gen_test
    async def test_verification_says_when_the_resolver_will_see_a_published_record(self, api, world, lab, clock):
        owner = world.owner()
        created = await add(api, owner, "fresh.lab.com")
        assert (await verify(api, owner, created))["status"] == "pending"
        publish_both(lab, created)
        result = await verify(api, owner, created)
        assert result["status"] == "pending"
        soonest, latest = (by_minute(clock.now() + dt.timedelta(seconds=s)) for s in (SOA_MINIMUM - 60, SOA_MINIMUM))
        assert "_acme-challenge.fresh.lab.com is published at the zone's own nameservers" in result["message"]
        assert any(f"will see the record by {t}" in result["message"] for t in (soonest, latest)), result["message"]

    @pytest.mark.gen_test
    async def test_the_diagnosis_says_when_the_resolver_will_see_it(self, api, world, lab, clock):
        owner = world.owner()
        created = await add(api, owner, "early.lab.com")
        await verify(api, owner, created)
        publish_both(lab, created)
        report = await diagnose(api, owner, created)
        waiting = [f for f in report["findings"] if f["code"] == "not_yet_visible"]
        assert len(waiting) == 2 and report["verdict"] == "waiting"
        latest = by_minute(clock.now() + dt.timedelta(seconds=SOA_MINIMUM))
        assert "still holds its earlier \"no such record\" answer, and will see it by" in waiting[0]["message"]
        assert latest in waiting[0]["message"] or by_minute(clock.now() + dt.timedelta(seconds=SOA_MINIMUM - 60)) in waiting[0]["message"]

    @pytest.mark.gen_test
    async def test_a_record_missing_everywhere_keeps_the_plain_message(self, api, world):
        owner = world.owner()
        created = await add(api, owner, "never.lab.com")
        result = await verify(api, owner, created)
        assert "No record exists at _acme-challenge.never.lab.com (NXDOMAIN)" in result["message"]
        assert "published at the zone's own nameservers" not in result["message"]


class TestStalePositiveAnswer:
    """Item 24: a record removed from the zone that Unbound still serves from its cache."""

    @pytest.mark.gen_test
    async def test_the_diagnosis_names_a_record_the_resolver_still_serves(self, api, world, lab):
        owner = world.owner()
        created = await add(api, owner, "stale.lab.com")
        publish_both(lab, created)
        assert (await verify(api, owner, created))["status"] == "verified"
        lab.remove("lab.com", "_acme-challenge.stale.lab.com")
        report = await diagnose(api, owner, created)
        found = finding(report, "still_cached")
        assert "still serves a CNAME record at _acme-challenge.stale.lab.com" in found["message"]
        assert "delegation_missing" in [f["code"] for f in report["findings"]]


class TestRecordAtTheZonesOwnName:
    """Item 22: the zone is itself a domain of the workspace, verified with its own records."""

    @pytest.mark.gen_test
    async def test_a_record_the_zones_own_domain_needs_is_never_called_misplaced(self, api, world, lab):
        owner = world.owner()
        zone_domain = await add(api, owner, "lab.com")
        publish_both(lab, zone_domain)
        created = await add(api, owner, "onlycname.lab.com")
        lab.publish("lab.com", f"_acme-challenge.onlycname.lab.com. 300 IN CNAME {created['validation']['delegation']['value']}.")
        report = await diagnose(api, owner, created)
        codes = [f["code"] for f in report["findings"]]
        assert "record_at_parent" not in codes and "ownership_missing" in codes


class TestBackgroundChecks:
    """Issue 23: a background check never asks again into a cached "no"."""

    @pytest.mark.gen_test
    async def test_after_a_negative_answer_the_next_check_waits_until_the_resolver_forgets_it(self, api, world, services, clock):
        owner = world.owner()
        created = await add(api, owner, "patient.lab.com")
        clock.advance(80)  # past the first check (interval_seconds 60, jitter up to 20 %)
        await LifecycleWatcher(services).tick()
        row = services.store.domains.get(owner.workspace.id, uuid.UUID(created["id"]))
        assert row.validation_checked_at is not None
        assert (row.next_check_at - clock.now()).total_seconds() >= SOA_MINIMUM - 10  # not the 120 s of the backoff
