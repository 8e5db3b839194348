"""GET /v1/domains/:id/diagnosis against real DNS servers on loopback.

The test DNS server the service is configured with (``dns``) plays the recursive resolver; a
second one on 127.0.0.2 plays the zone's authoritative nameserver, found the way a real one is:
NS records for ``example.com`` at the resolver, and the nameserver's address.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

import attrs
import pytest

from store.records import Certificate, DriftProblem
from tests.helpers import active_domain
from tests.servers.dns import DnsServer

APEX = "shop.example.com"
CNAME_AT = f"_acme-challenge.{APEX}"
TXT_AT = f"_service-verify.{APEX}"


@pytest.fixture
def config(config):
    """The zone's nameserver of these tests runs on 127.0.0.2, which the diagnosis dials only
    because ``[network] allow_private_ranges`` lets it, as it would a webhook or a scan."""
    return attrs.evolve(config, network=attrs.evolve(config.network, allow_private_ranges=["127.0.0.2/32"]))


@pytest.fixture(scope="module")
def authoritative():
    server = DnsServer("127.0.0.2").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def lagging():
    """A second resolver, on 127.0.0.3, that still holds an older view of the zone."""
    server = DnsServer("127.0.0.3").start()
    yield server
    server.stop()


@pytest.fixture
def zone(authoritative, dns, services):
    """example.com delegated to ns1.example.com (127.0.0.2), which is asked on its test port."""
    dns.publish("example.com", "NS", "ns1.example.com")
    dns.publish("ns1.example.com", "A", "127.0.0.2")
    services.authority.port = authoritative.port
    yield authoritative
    authoritative.clear()


async def new_domain(api, world):
    owner = world.owner()
    return owner, (await api.post("/v1/domains", {"apex": APEX}, token=owner.token)).body


def expected(created):
    """The two records the domain asks for: the CNAME's target and the TXT's value."""
    return created["validation"]["delegation"]["value"], created["validation"]["ownership"]["value"]


async def diagnose(api, owner, created):
    r = await api.get(f"/v1/domains/{created['id']}/diagnosis", token=owner.token)
    assert r.status == 200, r.body
    return r.body


def codes(report):
    return [f["code"] for f in report["findings"]]


def publish_both(server, created, *, cname=None, txt=None, ttl=300):
    target, value = expected(created)
    server.publish(CNAME_AT, "CNAME", cname or target, ttl=ttl)
    server.publish(TXT_AT, "TXT", txt or value, ttl=ttl)


class TestPublishedAndVisible:
    @pytest.mark.gen_test
    async def test_both_records_everywhere_is_all_good(self, api, world, dns, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        publish_both(dns, created)
        report = await diagnose(api, owner, created)
        assert (report["verdict"], codes(report)) == ("ok", ["all_good"])
        assert (report["zone"], report["nameservers"]) == ("example.com", ["ns1.example.com"])

    @pytest.mark.gen_test
    async def test_each_record_is_shown_from_the_zone_and_each_resolver_with_its_relative_name(self, api, world, dns, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        publish_both(dns, created, ttl=120)
        delegation = (await diagnose(api, owner, created))["records"][0]
        assert (delegation["name"], delegation["relativeName"], delegation["type"]) == (CNAME_AT, "_acme-challenge.shop", "CNAME")
        assert [(a["source"], a["outcome"], a["ttl"]) for a in delegation["answers"]] == [
            ("authoritative", "found", 300), (dns.address, "found", 120)
        ]


class TestNotPublishedOrNotVisible:
    @pytest.mark.gen_test
    async def test_nothing_published_names_both_records_and_their_fix(self, api, world, zone):
        owner, created = await new_domain(api, world)
        report = await diagnose(api, owner, created)
        assert report["verdict"] == "action_needed"
        assert codes(report) == ["delegation_missing", "ownership_missing"]
        target, value = expected(created)
        assert report["findings"][0]["fix"] == f"Publish a CNAME record named {CNAME_AT} with the value {target}."
        assert value in report["findings"][1]["fix"]

    @pytest.mark.gen_test
    async def test_published_at_the_zone_but_not_yet_at_the_resolver_is_waiting(self, api, world, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        report = await diagnose(api, owner, created)
        assert report["verdict"] == "waiting"
        assert codes(report) == ["not_yet_visible", "not_yet_visible"]
        assert "does not see it yet" in report["findings"][0]["message"]

    @pytest.mark.gen_test
    async def test_a_resolver_still_answering_the_old_value_says_how_long_it_may_keep_it(self, api, world, dns, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        publish_both(dns, created, cname="old-target.example.net", ttl=240)
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "not_yet_visible"]
        assert "still answers old-target.example.net" in finding["message"] and "240 s" in finding["message"]


class TestTwoResolvers:
    """``[dns] nameservers`` lists two resolvers: each is asked, and named, on its own."""

    @pytest.fixture
    def config(self, config, lagging):
        return attrs.evolve(config, dns=attrs.evolve(config.dns, nameservers=[*config.dns.nameservers, lagging.address]))

    @pytest.fixture(autouse=True)
    def _emptied(self, lagging):
        yield
        lagging.clear()

    @pytest.mark.gen_test
    async def test_the_resolver_that_lags_is_named_with_the_ttl_it_may_still_keep(self, api, world, dns, lagging, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        publish_both(dns, created)
        publish_both(lagging, created, cname="old-target.example.net", ttl=240)
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "not_yet_visible"]
        assert f"The CNAME record at {CNAME_AT} is published, but the resolver {lagging.address} still answers old-target.example.net" in finding["message"]
        assert "up to 240 s" in finding["message"] and dns.address not in finding["message"]
        assert finding["fix"] == (f"Nothing to change at {CNAME_AT}: wait up to 240 s for the resolver {lagging.address} "
                                  "to forget its cached answer, then check again.")
        assert report["verdict"] == "waiting"

    @pytest.mark.gen_test
    async def test_a_resolver_that_does_not_see_the_record_yet_is_named(self, api, world, dns, lagging, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        publish_both(dns, created)
        report = await diagnose(api, owner, created)
        findings = [f for f in report["findings"] if f["code"] == "not_yet_visible"]
        assert [f["message"].split(" is published")[0] for f in findings] == [f"The CNAME record at {CNAME_AT}", f"The TXT record at {TXT_AT}"]
        assert all(f"the resolver {lagging.address} does not see it yet" in f["message"] for f in findings)
        assert f"Nothing to change at {TXT_AT}" in findings[1]["fix"]

    @pytest.mark.gen_test
    async def test_a_resolver_still_serving_a_removed_record_is_named(self, api, world, dns, lagging, zone):
        owner, created = await new_domain(api, world)
        target, _ = expected(created)
        zone.publish(TXT_AT, "TXT", expected(created)[1])  # the CNAME was removed at the zone...
        dns.publish(TXT_AT, "TXT", expected(created)[1])
        publish_both(lagging, created, ttl=180)  # ...and a resolver still serves it from its cache
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "still_cached"]
        assert finding["severity"] == "warning"
        assert finding["message"] == (
            f"The resolver {lagging.address} still serves a CNAME record at {CNAME_AT} ({target}) that the zone "
            "no longer has; it may keep serving it for up to 180 s."
        )
        assert finding["fix"] == (
            f"If it was removed by mistake, publish it again at {CNAME_AT}; otherwise nothing to change: the resolver "
            f"{lagging.address} forgets it within 180 s."
        )
        assert "delegation_missing" in codes(report)  # what the zone publishes is what counts


class TestAnUnreachableResolver:
    """A second configured resolver where nothing listens: its lookups fail without any SERVFAIL."""

    UNREACHABLE = "127.0.0.1:9"

    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, dns=attrs.evolve(config.dns, nameservers=[*config.dns.nameservers, self.UNREACHABLE]))

    @pytest.mark.gen_test
    async def test_its_failure_is_a_failed_lookup_not_a_dnssec_failure(self, api, world, dns, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        publish_both(dns, created)
        report = await diagnose(api, owner, created)
        assert "dnssec_failure" not in codes(report)
        failed = [f for f in report["findings"] if f["code"] == "lookup_failed"]
        assert [f["message"].split(" (")[0] for f in failed] == [
            f"The resolver {self.UNREACHABLE} did not answer CNAME at {CNAME_AT}",
            f"The resolver {self.UNREACHABLE} did not answer TXT at {TXT_AT}",
        ]
        assert failed[0]["fix"] == f"Try again in a minute; if it persists, check the resolver {self.UNREACHABLE}."


class TestCommonMistakes:
    @pytest.mark.gen_test
    async def test_the_zone_appended_twice(self, api, world, zone):
        owner, created = await new_domain(api, world)
        target, _ = expected(created)
        zone.publish(f"{CNAME_AT}.example.com", "CNAME", target)
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "zone_appended_twice"]
        assert f"{CNAME_AT}.example.com" in finding["message"] and "_acme-challenge.shop" in finding["fix"]
        assert "delegation_missing" not in codes(report)

    @pytest.mark.gen_test
    async def test_the_txt_with_the_zone_appended_twice(self, api, world, zone):
        owner, created = await new_domain(api, world)
        _, value = expected(created)
        zone.publish(f"{TXT_AT}.example.com", "TXT", value)
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "zone_appended_twice"]
        assert finding["message"].startswith(f"The TXT record was published as {TXT_AT}.example.com")
        assert finding["fix"] == (f"Delete the TXT record {TXT_AT}.example.com and create it as {TXT_AT}: in the panel, "
                                  "with the name _service-verify.shop (relative to the zone).")
        assert "ownership_missing" not in codes(report)

    @pytest.mark.gen_test
    async def test_the_cname_at_the_zones_apex_instead_of_the_subdomain(self, api, world, zone):
        owner, created = await new_domain(api, world)
        target, _ = expected(created)
        zone.publish("_acme-challenge.example.com", "CNAME", target)
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "record_at_parent"]
        assert "published at _acme-challenge.example.com, the zone's own name" in finding["message"]
        assert finding["fix"] == (
            f"Add the CNAME record at {CNAME_AT} (in the panel: _acme-challenge.shop); the one at "
            "_acme-challenge.example.com does not count for shop.example.com."
        )
        assert "delegation_missing" in codes(report)  # the record this domain needs is still missing

    @pytest.mark.gen_test
    async def test_the_record_under_the_zone_instead_of_the_subdomain(self, api, world, zone):
        owner, created = await new_domain(api, world)
        _, value = expected(created)
        zone.publish("_service-verify.example.com", "TXT", value)
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "record_at_parent"]
        assert finding["fix"].startswith(f"Add the TXT record at {TXT_AT}") and "Move" not in finding["fix"]
        assert "ownership_missing" in codes(report)

    @pytest.mark.gen_test
    async def test_a_value_split_over_two_txt_records(self, api, world, zone):
        owner, created = await new_domain(api, world)
        target, value = expected(created)
        zone.publish(CNAME_AT, "CNAME", target)
        zone.publish(TXT_AT, "TXT", value[:28], value[28:])
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "ownership_split"]
        assert finding["fix"] == f"Replace the two TXT records at {TXT_AT} with one holding the whole value {value}."
        assert "ownership_wrong" not in codes(report) and "ownership_other_workspace" not in codes(report)

    @pytest.mark.gen_test
    async def test_a_record_the_zone_s_own_domain_needs_is_never_called_misplaced(self, api, world, zone):
        """The ownership token is the workspace's: the zone's own TXT, for its own domain, also holds
        it, and moving it (as an old fix said) would break that domain's verification."""
        owner, created = await new_domain(api, world)
        apex = (await api.post("/v1/domains", {"apex": "example.com"}, token=owner.token)).body
        zone.publish("_service-verify.example.com", "TXT", apex["validation"]["ownership"]["value"])
        target, _ = expected(created)
        zone.publish(CNAME_AT, "CNAME", target)
        report = await diagnose(api, owner, created)
        assert "record_at_parent" not in codes(report) and "ownership_missing" in codes(report)
        assert not any("_service-verify.example.com" in (f.get("fix") or "") for f in report["findings"])

    @pytest.mark.gen_test
    async def test_a_txt_record_blocking_the_cname(self, api, world, zone):
        owner, created = await new_domain(api, world)
        zone.publish(CNAME_AT, "TXT", "leftover")
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "delegation_blocked"]
        assert "TXT" in finding["message"] and finding["fix"].startswith(f"Delete the TXT records at {CNAME_AT}")

    @pytest.mark.gen_test
    async def test_address_records_blocking_the_cname(self, api, world, zone):
        owner, created = await new_domain(api, world)
        target, _ = expected(created)
        zone.publish(CNAME_AT, "A", "192.0.2.10")
        zone.publish(CNAME_AT, "AAAA", "2001:db8::10")
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "delegation_blocked"]
        assert finding["message"] == f"{CNAME_AT} has A and AAAA records, and a CNAME cannot share its name with other records."
        assert finding["fix"] == f"Delete the A and AAAA records at {CNAME_AT}, then publish a CNAME record named {CNAME_AT} with the value {target}."

    @pytest.mark.gen_test
    async def test_a_cname_target_with_the_zone_appended(self, api, world, zone):
        owner, created = await new_domain(api, world)
        target, _ = expected(created)
        zone.publish(CNAME_AT, "CNAME", f"{target}.example.com")
        report = await diagnose(api, owner, created)
        assert "delegation_target_zone_appended" in codes(report)

    @pytest.mark.gen_test
    async def test_a_cname_to_somewhere_else(self, api, world, zone):
        owner, created = await new_domain(api, world)
        zone.publish(CNAME_AT, "CNAME", "elsewhere.example.net")
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "delegation_wrong"]
        assert "elsewhere.example.net" in finding["message"]

    @pytest.mark.gen_test
    async def test_a_txt_without_the_token(self, api, world, zone):
        owner, created = await new_domain(api, world)
        zone.publish(TXT_AT, "TXT", "v=spf1 -all")
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "ownership_wrong"]
        assert "v=spf1 -all" in finding["message"] and "other TXT records may stay" in finding["fix"]

    @pytest.mark.gen_test
    async def test_a_value_with_quotes_is_accepted_with_a_warning(self, api, world, zone):
        owner, created = await new_domain(api, world)
        _, value = expected(created)
        zone.publish(TXT_AT, "TXT", f'"{value}"')
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "value_quoted"]
        assert finding["severity"] == "warning" and "ownership_missing" not in codes(report)

    @pytest.mark.gen_test
    async def test_quotes_that_change_the_value_are_an_error(self, api, world, zone):
        owner, created = await new_domain(api, world)
        _, value = expected(created)
        prefix, token = value.split("=", 1)
        zone.publish(TXT_AT, "TXT", f'{prefix}="{token}"')  # quotes typed around the token alone
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "value_quoted"]
        assert finding["severity"] == "error" and report["verdict"] == "action_needed"
        assert f'holds {prefix}="{token}": the quotes make it another value' in finding["message"]
        assert finding["fix"] == f"Set the TXT record at {TXT_AT} to {value}, without quote characters."

    @pytest.mark.gen_test
    async def test_the_ownership_token_of_another_workspace(self, api, world, zone):
        owner, created = await new_domain(api, world)
        other = world.owner()
        zone.publish(TXT_AT, "TXT", f"service-domain-verification={other.workspace.ownership_token}")
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "ownership_other_workspace"]
        assert other.workspace.name not in finding["message"]  # nothing of the other account is told...
        assert f"holds service-domain-verification={other.workspace.ownership_token}," in finding["message"]  # but DNS
        _, value = expected(created)
        assert finding["fix"] == f"Replace the value of the TXT record at {TXT_AT} with {value}."

    @pytest.mark.gen_test
    async def test_caa_forbidding_the_providers_authorities(self, api, world, dns, zone):
        owner, created = await new_domain(api, world)
        dns.publish_caa("example.com", "issue", "some-other-ca.example")
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "caa_forbids"]
        assert "some-other-ca.example" in finding["message"]

    @pytest.mark.gen_test
    async def test_a_servfail_where_the_zone_answers_is_reported_as_dnssec(self, api, world, dns, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        dns.zone.servfail.add(CNAME_AT)
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "dnssec_failure"]
        assert finding["message"].startswith(f"The resolver {dns.address} answers SERVFAIL for CNAME at {CNAME_AT} although")
        assert "DS record" in finding["fix"] and finding["fix"].startswith("Check the DNSSEC of the zone example.com")
        assert finding["fix"].endswith(f"Then check {CNAME_AT} again.")


class TestCertificate:
    @pytest.mark.gen_test
    async def test_an_active_certificate_whose_delegation_was_removed_is_at_risk(self, api, world, services, clock, zone):
        owner, cert = await active_domain(api, world, services, clock, apex=APEX)
        created = {"id": cert["domainId"]}
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "renewal_at_risk"]
        assert cert["notAfter"][:10] in finding["message"]
        assert report["provider"]["certificateStatus"] == "active"

    @pytest.mark.gen_test
    async def test_an_active_certificate_whose_cname_now_points_elsewhere_is_at_risk(self, api, world, services, clock, zone):
        owner, cert = await active_domain(api, world, services, clock, apex=APEX)
        zone.publish(CNAME_AT, "CNAME", "elsewhere.example.net")
        target = (await api.get(f"/v1/domains/{cert['domainId']}", token=owner.token)).body["validation"]["delegation"]["value"]
        report = await diagnose(api, owner, {"id": cert["domainId"]})
        [finding] = [f for f in report["findings"] if f["code"] == "renewal_at_risk"]
        assert finding["message"] == (
            f"The certificate is active until {cert['notAfter'][:10]}, but the CNAME at {CNAME_AT} now points at "
            f"elsewhere.example.net instead of {target}: the provider cannot renew it, and it will expire."
        )
        assert finding["fix"] == f"Restore the CNAME record {CNAME_AT} with the value {target}."

    @pytest.mark.gen_test
    async def test_an_issuance_in_progress_is_waiting_for_the_provider(self, api, world, services, dns, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        publish_both(dns, created)
        assert (await api.post(f"/v1/domains/{created['id']}/verify-delegation", token=owner.token)).body["status"] == "verified"
        report = await diagnose(api, owner, created)
        assert (codes(report), report["verdict"]) == (["provider_pending", "all_good"], "waiting")
        assert report["provider"]["certificateStatus"] == "pending"

    @pytest.mark.gen_test
    async def test_a_host_on_a_private_address_is_diagnosed_without_its_served_certificate(self, api, world, services, clock, dns, zone):
        owner, cert = await active_domain(api, world, services, clock, apex=APEX)
        dns.publish(APEX, "A", "10.0.0.5")  # the scan may not go there
        report = await diagnose(api, owner, {"id": cert["domainId"]})
        assert "served_mismatch" not in codes(report) and "renewal_at_risk" in codes(report)

    @pytest.mark.gen_test
    async def test_the_providers_refusal_is_shown(self, api, world, services, zone):
        owner, created = await new_domain(api, world)
        services.store.certificates.insert(Certificate(
            id=uuid.uuid4(), domain_id=uuid.UUID(created["id"]), apex=APEX, wildcard=False, issuer="Edge Provider Managed CA",
            status="error", provider="edge_provider_for_saas", bundle_available=False, workspace_id=owner.workspace.id,
            created_at=services.clock.now(), last_error="Blocked by the provider.",
        ))
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "provider_error"]
        assert "Blocked by the provider." in finding["message"]


    @pytest.mark.gen_test
    async def test_the_providers_refusal_with_nothing_else_found_points_at_no_findings_above(
            self, api, world, services, dns, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        publish_both(dns, created)
        services.store.certificates.insert(Certificate(
            id=uuid.uuid4(), domain_id=uuid.UUID(created["id"]), apex=APEX, wildcard=False, issuer="Edge Provider Managed CA",
            status="error", provider="edge_provider_for_saas", bundle_available=False, workspace_id=owner.workspace.id,
            created_at=services.clock.now(), last_error="Validation timed out.",
        ))
        report = await diagnose(api, owner, created)
        assert codes(report) == ["provider_error"]
        assert "above" not in report["findings"][0]["fix"] and "check again" in report["findings"][0]["fix"]


class TestWithoutTheZonesServers:
    @pytest.mark.gen_test
    async def test_without_ns_records_the_resolvers_answers_are_used(self, api, world, dns):
        owner, created = await new_domain(api, world)
        publish_both(dns, created)
        report = await diagnose(api, owner, created)
        assert codes(report) == ["authority_unknown", "all_good"] and report["verdict"] == "ok"
        assert report["zone"] is None


class TestUnansweredLookups:
    """Names the test DNS servers leave unanswered (``silent``): each lookup of them times out."""

    @pytest.fixture
    def dns_timeout(self):
        return 0.5

    @pytest.mark.gen_test
    async def test_a_resolver_that_does_not_answer(self, api, world, dns, zone):
        owner, created = await new_domain(api, world)
        publish_both(zone, created)
        publish_both(dns, created)
        dns.zone.silent.add(TXT_AT)
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "lookup_failed"]
        assert "timeout" in finding["message"] and report["verdict"] == "waiting"

    @pytest.mark.gen_test
    async def test_when_no_dns_server_answers_an_active_certificate_is_not_called_at_risk(self, api, world, services, clock, dns, zone):
        owner, cert = await active_domain(api, world, services, clock, apex=APEX)
        for server in (dns, zone):
            server.zone.silent.update({CNAME_AT, TXT_AT})
        report = await diagnose(api, owner, {"id": cert["domainId"]})
        assert "renewal_at_risk" not in codes(report)
        [finding] = [f for f in report["findings"] if f["code"] == "renewal_unchecked"]
        assert finding["severity"] == "warning" and f"whether the CNAME at {CNAME_AT} still points at" in finding["message"]
        assert "could not be checked: no DNS server answered for it" in finding["message"]
        assert CNAME_AT in finding["fix"]

    @pytest.mark.gen_test
    async def test_when_nobody_answers_nothing_is_called_missing(self, api, world, dns):
        owner, created = await new_domain(api, world)
        dns.zone.silent.update({CNAME_AT, TXT_AT})
        report = await diagnose(api, owner, created)
        assert "delegation_missing" not in codes(report) and "ownership_missing" not in codes(report)
        assert codes(report).count("lookup_failed") == 2

    @pytest.mark.gen_test
    async def test_an_ns_lookup_that_times_out_stops_the_walk_and_is_reported(self, api, world, dns, zone):
        owner, created = await new_domain(api, world)
        dns.zone.silent.add(APEX)  # is shop.example.com a zone of its own? Nobody says
        report = await diagnose(api, owner, created)
        assert report["zone"] is None  # not example.com: its servers would only refer to shop's, if it is one
        [walk] = [f for f in report["findings"] if f["code"] == "lookup_failed" and "NS at" in f["message"]]
        assert walk["message"].startswith(f"The resolvers did not answer NS at {APEX} (timeout) while the zone's own nameservers")
        assert walk["fix"] == f"Try again in a minute; if it persists, check that the resolvers can resolve NS at {APEX}."
        assert "authority_unknown" in codes(report)

    @pytest.mark.gen_test
    async def test_zone_servers_that_do_not_answer_are_named(self, api, world, dns, zone):
        owner, created = await new_domain(api, world)
        publish_both(dns, created)
        zone.zone.silent.update({CNAME_AT, TXT_AT})
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "authority_unknown"]
        assert finding["message"] == "The zone's own nameservers (ns1.example.com) did not answer; the answers below are the resolvers' only."


class TestNameserversOnPrivateAddresses:
    @pytest.fixture
    def internal(self, dns, services):
        """A nameserver on 127.0.0.4, outside the allowed ranges, that example.com names as its own."""
        server = DnsServer("127.0.0.4").start()
        dns.publish("example.com", "NS", "ns1.example.com")
        dns.publish("ns1.example.com", "A", "127.0.0.4")
        services.authority.port = server.port
        yield server
        server.stop()

    @pytest.mark.gen_test
    async def test_a_nameserver_on_a_private_address_is_never_asked(self, api, world, dns, internal):
        owner, created = await new_domain(api, world)
        internal.publish(CNAME_AT, "CNAME", "secret.internal.example")
        publish_both(dns, created)
        report = await diagnose(api, owner, created)
        assert internal.zone.queries == []
        assert "secret.internal.example" not in str(report)
        assert all(answer["source"] != "authoritative" for record in report["records"] for answer in record["answers"])

    @pytest.mark.gen_test
    async def test_it_is_reported_as_not_publicly_reachable_without_its_address(self, api, world, dns, internal):
        owner, created = await new_domain(api, world)
        publish_both(dns, created)
        report = await diagnose(api, owner, created)
        [finding] = [f for f in report["findings"] if f["code"] == "authority_unknown"]
        assert finding["message"] == (
            "The zone's own nameservers (ns1.example.com) are not publicly reachable, so the service does not ask "
            "them; the answers below are the resolvers' only."
        )
        assert "127.0.0.4" not in str(report)

    @pytest.mark.gen_test
    async def test_the_public_link_page_does_not_ask_it_either(self, api, world, dns, internal, http_client, base_url):
        owner, created = await new_domain(api, world)
        url = (await api.post("/v1/verification-links", {"domainId": created["id"]}, token=owner.token)).body["url"]
        internal.publish(CNAME_AT, "CNAME", "secret.internal.example")
        page = await http_client.fetch(base_url + urlsplit(url).path + "?diagnose=1", raise_error=False)
        assert page.code == 200
        assert internal.zone.queries == []
        assert b"secret.internal.example" not in page.body and b"not publicly reachable" in page.body


class TestAccess:
    @pytest.mark.gen_test
    async def test_same_credentials_as_verify(self, api, world, zone):
        owner, created = await new_domain(api, world)
        path = f"/v1/domains/{created['id']}/diagnosis"
        reader = world.member(owner.workspace, "read_only")
        assert (await api.get(path, token=reader.token)).code == "forbidden"
        assert (await api.get(path, token=world.key(owner.workspace, ["domains:write"]))).code == "insufficient_scope"
        assert (await api.get(path, token=world.key(owner.workspace, ["domains:write", "certificates:write"]))).status == 200

    @pytest.mark.gen_test
    async def test_another_workspaces_domain_is_not_found(self, api, world, zone):
        _, created = await new_domain(api, world)
        stranger = world.owner()
        r = await api.get(f"/v1/domains/{created['id']}/diagnosis", token=stranger.token)
        assert (r.status, r.code) == (404, "not_found")


class TestOneCnameOneProblem:
    """Issue 48, item 8: a serving certificate's CNAME gone, recorded as drift too, was three
    problems (``delegation_missing``, ``drift_recorded``, ``renewal_at_risk``) for one record."""

    @pytest.mark.gen_test
    async def test_a_missing_cname_of_a_serving_certificate_is_one_problem_saying_since_when(
            self, api, world, services, clock, zone):
        owner, cert = await active_domain(api, world, services, clock, apex=APEX)
        with services.store.transaction():
            row = services.store.domains.get(owner.workspace.id, uuid.UUID(cert["domainId"]))
            services.store.domains.update(attrs.evolve(row, drift_since=services.clock.now(), drift=(
                DriftProblem("delegation_missing", f"No record exists at {CNAME_AT} (NXDOMAIN).", "Publish it again."),)))
        report = await diagnose(api, owner, {"id": cert["domainId"]})
        about_the_cname = [f for f in report["findings"] if f["code"] in ("delegation_missing", "drift_recorded",
                                                                           "renewal_at_risk")]
        assert [f["code"] for f in about_the_cname] == ["renewal_at_risk"]
        assert "Checks have found this since 2026-11-22 10:00 UTC." in about_the_cname[0]["message"]
