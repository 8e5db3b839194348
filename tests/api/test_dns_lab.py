"""Verification and diagnosis against real DNS software: NSD serving the zones, Unbound resolving
and validating (tests/servers/dns_lab.py). These are the cases a fake server cannot show, found by
the second review (items 21 to 24): a resolver's caches, negative and positive, and DNSSEC; and by
the lab of issue 37: lame delegations, a delegation that changes, drift judged by its own evidence,
a resolver's cache left alone by the diagnosis, CNAME chains and loops.

Every test uses names of its own: Unbound's cache lives as long as the module's lab. The tests run
on SQLite only: what they check is the DNS software's answers and our verdicts on them, which the
storage backend does not change (every other API test runs on both), and a second lab with the
same names would double the time it takes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid

import attrs
import pytest

from core.clock import by_minute
from core.config import DnsConfig
from core.dns import caa
from core.lifecycle.watcher import LifecycleWatcher
from tests.helpers import mark_verified
from tests.patience import PATIENCE_SECONDS
from tests.servers.dns_lab import LAME, PARTLY, RESIGNED, SIGNED, SILENT, SOA_MINIMUM, DnsLab, missing_tools

pytestmark = [
    pytest.mark.skipif(bool(missing_tools()), reason=f"needs {', '.join(missing_tools())} (Debian packages "
                       "nsd, unbound, ldnsutils; .ci/run installs them)"),
    pytest.mark.sqlite_only,
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = DnsLab(tmp_path_factory.mktemp("dns-lab"))
    lab.records[SIGNED] += _records_of("shop", SIGNED) + _records_of("drifted", SIGNED)
    lab.zone(UNTOUCHED)
    lab.unserved[LAME_SUB_ZONE] = [(f"ns1.{LAME_SUB_ZONE}", SILENT)]
    yield lab.start()
    lab.stop()


#: A zone whose apex becomes a domain after a diagnosis of a name below it.
UNTOUCHED = "untouched.com"
#: A sub-zone of lab.com delegated to a nameserver that never answers: lab.com itself answers.
LAME_SUB_ZONE = "dead.lab.com"


def _records_of(label, zone):
    """Placeholder records at a name, so the signed zone has them from the start (values do not matter:
    no resolver will validate them)."""
    return [f"_acme-challenge.{label}.{zone}. 300 IN CNAME target.example.net.",
            f'_service-verify.{label}.{zone}. 300 IN TXT "service-domain-verification=x"']


@pytest.fixture
def config(config, lab):
    """Unbound as the service's resolver; the lab's nameservers on 127.0.0.1 to 127.0.0.4, which
    the diagnosis may dial only because ``allow_private_ranges`` says so."""
    return attrs.evolve(config, dns=DnsConfig(nameservers=[lab.resolver], timeout_seconds=2),
                        network=attrs.evolve(config.network, allow_private_ranges=["127.0.0.0/29"]))


@pytest.fixture
def services(services, lab):
    services.authority.port = lab.nsd_port
    return services


def publish_both(lab, created, zone="lab.com", *, cname=None):
    apex = created["apex"]
    lab.publish(zone, f"_acme-challenge.{apex}. 300 IN CNAME {cname or created['validation']['delegation']['value']}.")
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


def codes(report):
    return [f["code"] for f in report["findings"]]


async def domain(api, owner, created):
    r = await api.get(f"/v1/domains/{created['id']}", token=owner.token)
    assert r.status == 200, r.body
    return r.body


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
        assert "no certificate is requested for the domain" in (verdict.message or "")

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

    @pytest.mark.gen_test
    async def test_a_domain_only_waiting_for_a_cache_is_pending_not_action_needed(self, api, world, lab):
        owner = world.owner()
        created = await add(api, owner, "cached.lab.com")
        await verify(api, owner, created)
        publish_both(lab, created)
        result = await verify(api, owner, created)
        assert "Nothing to change" in result["message"]
        assert (await domain(api, owner, created))["opsStatus"] == "pending"

    @pytest.mark.gen_test
    async def test_a_record_still_missing_at_the_zone_leaves_the_domain_action_needed(self, api, world, lab):
        owner = world.owner()
        created = await add(api, owner, "halfway.lab.com")
        await verify(api, owner, created)
        lab.publish("lab.com", f"_acme-challenge.halfway.lab.com. 300 IN CNAME {created['validation']['delegation']['value']}.")
        await verify(api, owner, created)
        assert (await domain(api, owner, created))["opsStatus"] == "action_needed"


class TestDriftWaitingOnACache:
    """Issue 46, item 6d: a verified domain's CNAME published again, the resolver still holding its
    "no such record": nothing to change, so the domain waits; it does not need action."""

    async def republished(self, api, world, lab, services, apex):
        owner = world.owner()
        created = await add(api, owner, apex)
        mark_verified(services, created)
        await verify(api, owner, created)  # the resolver caches "no such record"
        assert [p["code"] for p in (await domain(api, owner, created))["validation"]["drift"]["problems"]] == [
            "delegation_missing"]
        publish_both(lab, created)
        result = await verify(api, owner, created)
        assert "Nothing to change" in result["message"]
        return owner, created, result

    @pytest.mark.gen_test
    async def test_the_domain_is_pending_not_action_needed(self, api, world, lab, services):
        owner, created, _ = await self.republished(api, world, lab, services, "cached-drift.lab.com")
        assert (await domain(api, owner, created))["opsStatus"] == "pending"

    @pytest.mark.gen_test
    async def test_its_fix_asks_for_nothing_to_be_published(self, api, world, lab, services):
        owner, created, result = await self.republished(api, world, lab, services, "cached-fix.lab.com")
        [problem] = (await domain(api, owner, created))["validation"]["drift"]["problems"]
        assert "Publish" not in problem["fix"] and "Publish" not in result["message"]
        assert "next renewal of its certificate will fail" not in result["message"]


class TestTheDiagnosisLeavesTheResolversCacheAlone:
    """Issue 37, item 5: the misplacement probes at the zone's own names go to the zone's servers only."""

    @pytest.mark.gen_test
    async def test_the_zones_apex_added_after_a_diagnosis_below_it_verifies_at_once(self, api, world, lab):
        owner = world.owner()
        below = await add(api, owner, f"www.{UNTOUCHED}")
        await diagnose(api, owner, below)
        apex = await add(api, owner, UNTOUCHED)
        publish_both(lab, apex, UNTOUCHED)
        assert (await verify(api, owner, apex))["status"] == "verified"


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


class TestLameDelegation:
    """Issue 37, item 2: lame.com is delegated by com to three nameservers, none serving it."""

    @pytest.mark.gen_test
    async def test_the_diagnosis_names_the_zone_and_how_each_nameserver_fails(self, api, world):
        owner = world.owner()
        report = await diagnose(api, owner, await add(api, owner, f"shop.{LAME}"))
        found = finding(report, "lame_delegation")
        assert found["severity"] == "error" and report["verdict"] == "action_needed"
        assert f"The zone {LAME} is delegated by its parent zone com" in found["message"]
        assert f"ns1.{LAME} (127.0.0.2): no answer within 2 s" in found["message"]
        assert f"ns2.{LAME} (127.0.0.3): answers REFUSED" in found["message"]
        assert f"ns3.{LAME} (127.0.0.4): nothing listens on its DNS port" in found["message"]
        assert f"At the registrar of {LAME}" in found["fix"]

    @pytest.mark.gen_test
    async def test_the_diagnosis_does_not_ask_to_retry_or_check_the_resolver(self, api, world):
        owner = world.owner()
        report = await diagnose(api, owner, await add(api, owner, f"www.{LAME}"))
        assert "lookup_failed" not in codes(report) and "authority_unknown" not in codes(report)
        assert (report["zone"], report["nameservers"]) == (LAME, [f"ns1.{LAME}", f"ns2.{LAME}", f"ns3.{LAME}"])

    @pytest.mark.gen_test
    async def test_verification_names_the_lame_delegation_instead_of_a_retry(self, api, world):
        owner = world.owner()
        result = await verify(api, owner, await add(api, owner, f"api.{LAME}"))
        assert result["status"] == "error"
        assert f"The zone {LAME} is delegated by its parent zone com to nameservers that do not answer" in result["message"]
        assert "try again shortly" not in result["message"]

    @pytest.mark.gen_test
    async def test_verification_names_the_lame_delegation_once(self, api, world):
        """Issue 46, item 6e: both records' lookups fail the same way; the paragraph is said once."""
        owner = world.owner()
        result = await verify(api, owner, await add(api, owner, f"once.{LAME}"))
        assert result["message"].count(f"The zone {LAME} is delegated") == 1

    @pytest.mark.gen_test
    async def test_a_zone_with_one_silent_nameserver_gets_a_warning(self, api, world, lab):
        owner = world.owner()
        created = await add(api, owner, f"shop.{PARTLY}")
        publish_both(lab, created, PARTLY)
        report = await diagnose(api, owner, created)
        found = finding(report, "partly_lame_delegation")
        assert found["severity"] == "warning" and "all_good" not in codes(report)
        assert f"ns2.{PARTLY} (127.0.0.2): no answer within 2 s" in found["message"]
        assert f"Remove ns2.{PARTLY} from the NS records of {PARTLY}" in found["fix"]


class TestQuietZones:
    """Issue 46, item 6a: a lame zone's hostnames wait after its first check, but the zone that does
    not answer is the lame one, not its registrable domain: lab.com's other hostnames are checked."""

    async def lame_checked(self, api, owner, services, clock):
        """A sweep that checked a hostname in the lame sub-zone; the watcher, which remembers it."""
        await add(api, owner, f"www.{LAME_SUB_ZONE}")
        clock.advance(80)  # its first check is due
        watcher = LifecycleWatcher(services)
        await watcher.tick()
        return watcher

    @pytest.mark.gen_test
    async def test_the_registrable_domains_other_hostnames_are_still_checked(self, api, world, services, clock):
        owner = world.owner()
        watcher = await self.lame_checked(api, owner, services, clock)
        neighbour = await add(api, owner, "neighbour.lab.com")
        clock.advance(80)
        await watcher.tick()
        row = services.store.domains.get(owner.workspace.id, uuid.UUID(neighbour["id"]))
        assert row.validation_checked_at is not None

    @pytest.mark.gen_test
    async def test_the_lame_zones_other_hostnames_wait(self, api, world, services, clock):
        owner = world.owner()
        watcher = await self.lame_checked(api, owner, services, clock)
        sibling = await add(api, owner, f"shop.{LAME_SUB_ZONE}")
        clock.advance(80)
        await watcher.tick()
        row = services.store.domains.get(owner.workspace.id, uuid.UUID(sibling["id"]))
        assert row.validation_checked_at is None and row.next_check_at > clock.now()


class TestDelegationChanges:
    """Issue 37, item 3: a check that finds a record missing names the zone as DNS has it now."""

    @pytest.mark.gen_test
    async def test_a_sub_zone_delegated_after_the_first_check_is_named_at_the_next(self, api, world, lab):
        owner = world.owner()
        created = await add(api, owner, "shop.sub.lab.com")
        await verify(api, owner, created)
        assert (await domain(api, owner, created))["dnsHost"]["zone"] == "lab.com"
        lab.delegate("sub.lab.com")
        try:
            await verify(api, owner, created)
            assert (await domain(api, owner, created))["dnsHost"]["zone"] == "sub.lab.com"
        finally:
            lab.undelegate("sub.lab.com")

    @pytest.mark.gen_test
    async def test_a_sub_zone_undelegated_is_named_again_by_a_background_check(self, api, world, lab, services, clock):
        owner = world.owner()
        created = await add(api, owner, "www.moved.lab.com")
        lab.delegate("moved.lab.com")
        try:
            await verify(api, owner, created)
            assert (await domain(api, owner, created))["dnsHost"]["zone"] == "moved.lab.com"
        finally:
            lab.undelegate("moved.lab.com")
        clock.advance(3600)
        await LifecycleWatcher(services).tick()
        assert (await domain(api, owner, created))["dnsHost"]["zone"] == "lab.com"


    @pytest.mark.gen_test
    async def test_a_check_that_verifies_after_an_undelegation_names_the_zone_again(self, api, world, lab):
        """Issue 46, item 6c: the check that finds both records, not only one that finds one missing."""
        owner = world.owner()
        created = await add(api, owner, "www.back.lab.com")
        lab.delegate("back.lab.com")
        try:
            await verify(api, owner, created)
            assert (await domain(api, owner, created))["dnsHost"]["zone"] == "back.lab.com"
        finally:
            lab.undelegate("back.lab.com")
        publish_both(lab, created)
        assert (await verify(api, owner, created))["status"] == "verified"
        assert (await domain(api, owner, created))["dnsHost"]["zone"] == "lab.com"


class TestDriftJudgedByItsOwnEvidence:
    """Issue 37, item 4: the zone publishes the right CNAME, but its DNSSEC fails."""

    @pytest.mark.gen_test
    async def test_dnssec_drift_stays_an_error_while_the_resolvers_fail(self, api, world, lab, services):
        owner = world.owner()
        created = await add(api, owner, f"drifted.{SIGNED}")
        lab.remove(SIGNED, f"_acme-challenge.drifted.{SIGNED}")
        publish_both(lab, created, SIGNED)
        mark_verified(services, created)
        await verify(api, owner, created)
        assert [p["code"] for p in (await domain(api, owner, created))["validation"]["drift"]["problems"]] == ["dnssec_failure"]
        report = await diagnose(api, owner, created)
        drift = finding(report, "drift_recorded")
        assert drift["severity"] == "error" and "the next check clears this" not in drift["message"]


class TestCnameChains:
    """Issue 37, item 6: DNS-01 follows CNAME chains; a loop is named as one."""

    @pytest.mark.gen_test
    async def test_a_chain_ending_at_the_target_verifies(self, api, world, lab):
        owner = world.owner()
        created = await add(api, owner, "chained.lab.com")
        lab.publish("lab.com", f"hop.chained.lab.com. 300 IN CNAME {created['validation']['delegation']['value']}.")
        publish_both(lab, created, cname="hop.chained.lab.com")
        assert (await verify(api, owner, created))["status"] == "verified"

    @pytest.mark.gen_test
    async def test_the_diagnosis_says_it_is_a_chain_and_where_it_ends(self, api, world, lab):
        owner = world.owner()
        created = await add(api, owner, "linked.lab.com")
        target = created["validation"]["delegation"]["value"]
        lab.publish("lab.com", f"hop.linked.lab.com. 300 IN CNAME {target}.")
        publish_both(lab, created, cname="hop.linked.lab.com")
        report = await diagnose(api, owner, created)
        found = finding(report, "delegation_chain")
        assert f"_acme-challenge.linked.lab.com → hop.linked.lab.com → {target}" in found["message"]
        assert "delegation_wrong" not in codes(report) and report["verdict"] == "ok"

    @pytest.mark.gen_test
    async def test_a_loop_is_named_a_loop(self, api, world, lab):
        owner = world.owner()
        created = await add(api, owner, "looped.lab.com")
        lab.publish("lab.com", "a.looped.lab.com. 300 IN CNAME b.looped.lab.com.")
        lab.publish("lab.com", "b.looped.lab.com. 300 IN CNAME a.looped.lab.com.")
        publish_both(lab, created, cname="a.looped.lab.com")
        result = await verify(api, owner, created)
        assert result["status"] == "error" and "leads into a loop" in result["message"]
        found = finding(await diagnose(api, owner, created), "delegation_loop")
        assert "a.looped.lab.com → b.looped.lab.com → a.looped.lab.com" in found["message"]


async def until_due(services, owner, created, clock):
    """Move the clock to the domain's next check and sweep."""
    row = services.store.domains.get(owner.workspace.id, uuid.UUID(created["id"]))
    clock.advance(max((row.next_check_at - clock.now()).total_seconds(), 0) + 0.001)
    await LifecycleWatcher(services).tick()


async def until_seen(services, name, rtype, seen, timeout=PATIENCE_SECONDS):
    """Wait until the resolver's answer at ``name`` satisfies ``seen`` (what it cached has expired)."""
    deadline = time.monotonic() + timeout
    while not seen(found := await services.dns.lookup(name, rtype)):
        assert time.monotonic() < deadline, f"the resolver still answers {found} at {name}"
        await asyncio.sleep(0.2)


class TestFixesPickedUpByTheBackgroundChecks:
    """Issue 46, item 3: each fix the service asks for is found by the background checks, with no
    API call, once the resolver sees it. The records are published with a TTL of 1 s, so the
    resolver forgets the wrong ones at once."""

    @pytest.mark.gen_test
    async def test_a_cname_fixed_verifies_and_starts_issuance_at_the_next_check(self, api, world, lab, services, clock):
        owner = world.owner()
        created = await add(api, owner, "cname-fix.lab.com")
        lab.publish("lab.com", "_acme-challenge.cname-fix.lab.com. 1 IN CNAME elsewhere.lab.com.")
        value = created["validation"]["ownership"]["value"]
        lab.publish("lab.com", f'_service-verify.cname-fix.lab.com. 1 IN TXT "{value}"')
        await until_due(services, owner, created, clock)
        assert (await domain(api, owner, created))["validation"]["status"] == "error"
        target = created["validation"]["delegation"]["value"]
        lab.remove("lab.com", "_acme-challenge.cname-fix.lab.com")
        lab.publish("lab.com", f"_acme-challenge.cname-fix.lab.com. 1 IN CNAME {target}.")
        await until_seen(services, "_acme-challenge.cname-fix.lab.com", "CNAME", lambda found: target in found.values)
        await until_due(services, owner, created, clock)
        found = await domain(api, owner, created)
        assert (found["validation"]["status"], found["cert"]["status"]) == ("verified", "pending")

    @pytest.mark.gen_test
    async def test_a_txt_fixed_verifies_and_starts_issuance_at_the_next_check(self, api, world, lab, services, clock):
        owner = world.owner()
        created = await add(api, owner, "txt-fix.lab.com")
        value = created["validation"]["ownership"]["value"]
        lab.publish("lab.com", f"_acme-challenge.txt-fix.lab.com. 1 IN CNAME {created['validation']['delegation']['value']}.")
        lab.publish("lab.com", '_service-verify.txt-fix.lab.com. 1 IN TXT "service-domain-verification=old"')
        await until_due(services, owner, created, clock)
        assert (await domain(api, owner, created))["validation"]["status"] == "error"
        lab.remove("lab.com", "_service-verify.txt-fix.lab.com")
        lab.publish("lab.com", f'_service-verify.txt-fix.lab.com. 1 IN TXT "{value}"')
        await until_seen(services, "_service-verify.txt-fix.lab.com", "TXT",
                         lambda found: any(value in v for v in found.values))
        await until_due(services, owner, created, clock)
        found = await domain(api, owner, created)
        assert (found["validation"]["status"], found["cert"]["status"]) == ("verified", "pending")

    @pytest.mark.gen_test
    async def test_dnssec_fixed_after_the_preflight_stopped_issuance_starts_it_at_the_next_check(
            self, api, world, lab, services, clock):
        owner = world.owner()
        created = await add(api, owner, f"shop.{RESIGNED}")
        publish_both(lab, created, RESIGNED)
        mark_verified(services, created)
        r = await api.post(f"/v1/domains/{created['id']}/certificates/issue", {}, token=owner.token)
        assert r.body["status"] == "error" and f"DNSSEC validation fails at shop.{RESIGNED}" in r.body["message"]
        lab.resign(RESIGNED)
        await until_seen(services, f"shop.{RESIGNED}", "CAA", lambda found: found.outcome != "error")
        await until_due(services, owner, created, clock)
        assert (await domain(api, owner, created))["cert"]["status"] == "pending"
