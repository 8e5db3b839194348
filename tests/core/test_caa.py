"""The CAA pre-flight against the real DNS test server (RFC 8659 relevant record set)."""

from __future__ import annotations

import pytest

from core.config import DnsConfig
from core.dns.caa import preflight
from core.dns.lookups import DnsChecker

ISSUERS = ["letsencrypt.org", "pki.goog", "ssl.com"]


@pytest.fixture
def checker(dns):
    return DnsChecker(DnsConfig(nameservers=[dns.address], timeout_seconds=0.5))


class TestAllowed:
    """Issuance goes ahead."""

    @pytest.mark.gen_test
    async def test_no_caa_anywhere_allows_any_ca(self, checker):
        assert (await preflight(checker, "shop.example.com", ISSUERS)).allowed

    @pytest.mark.gen_test
    async def test_a_record_naming_a_provider_ca_allows(self, checker, dns):
        dns.publish_caa("example.com", "issue", "digicert.com")
        dns.publish_caa("example.com", "issue", "letsencrypt.org")
        verdict = await preflight(checker, "shop.example.com", ISSUERS)
        assert verdict.allowed and verdict.message is None

    @pytest.mark.gen_test
    async def test_parameters_after_the_issuer_domain_are_ignored(self, checker, dns):
        dns.publish_caa("example.com", "issue", "pki.goog; cansignhttpexchanges=yes")
        assert (await preflight(checker, "shop.example.com", ISSUERS)).allowed

    @pytest.mark.gen_test
    async def test_issuewild_and_iodef_do_not_restrict_exact_names(self, checker, dns):
        dns.publish_caa("example.com", "issuewild", "digicert.com")
        dns.publish_caa("example.com", "iodef", "mailto:security@example.com")
        assert (await preflight(checker, "shop.example.com", ISSUERS)).allowed

    @pytest.mark.gen_test
    async def test_the_closest_record_set_wins(self, checker, dns):
        dns.publish_caa("example.com", "issue", "digicert.com")
        dns.publish_caa("shop.example.com", "issue", "ssl.com")
        assert (await preflight(checker, "shop.example.com", ISSUERS)).allowed

    @pytest.mark.gen_test
    async def test_a_failed_lookup_allows_and_says_so(self, checker, dns):
        dns.zone.servfail.add("example.com")
        verdict = await preflight(checker, "shop.example.com", ISSUERS)
        assert verdict.allowed
        assert verdict.message.startswith("The CAA lookup at example.com failed (")
        assert verdict.message.endswith("so CAA was not checked before issuing.")


class TestForbidden:
    """Issuance is stopped before the provider is asked."""

    @pytest.mark.gen_test
    async def test_records_naming_only_other_cas_forbid_and_name_the_records_to_add(self, checker, dns):
        dns.publish_caa("example.com", "issue", "digicert.com")
        verdict = await preflight(checker, "shop.example.com", ISSUERS)
        assert not verdict.allowed
        assert verdict.message == (
            'The CAA records at example.com (0 issue "digicert.com") allow none of the certificate authorities '
            "the edge provider uses, so the certificate cannot be issued. Add these records at example.com: "
            'example.com. CAA 0 issue "letsencrypt.org"; example.com. CAA 0 issue "pki.goog"; '
            'example.com. CAA 0 issue "ssl.com".'
        )

    @pytest.mark.gen_test
    async def test_an_empty_issuer_forbids_every_ca(self, checker, dns):
        dns.publish_caa("shop.example.com", "issue", ";")
        assert not (await preflight(checker, "shop.example.com", ISSUERS)).allowed

    @pytest.mark.gen_test
    async def test_a_critical_unknown_property_forbids(self, checker, dns):
        dns.publish_caa("example.com", "issue", "letsencrypt.org")
        dns.publish_caa("example.com", "tbs", "unknown", flags=128)
        verdict = await preflight(checker, "shop.example.com", ISSUERS)
        assert not verdict.allowed and "critical" in verdict.message
