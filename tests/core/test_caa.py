"""The CAA pre-flight against the real DNS test server (RFC 8659 relevant record set)."""

from __future__ import annotations

import pytest

from core.dns.caa import CaaIssuer, preflight
from core.dns.lookups import DnsChecker

ISSUERS = ["letsencrypt.org", "pki.goog", "ssl.com"]


@pytest.fixture
def checker(dns):
    return DnsChecker(dns.config())


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
            "the service uses (for its account, by DNS-01), so the certificate cannot be issued. Add at "
            'example.com: example.com. CAA 0 issue "letsencrypt.org"; example.com. CAA 0 issue "pki.goog"; '
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


ACCOUNT = "https://acme-v02.api.letsencrypt.org/acme/acct/123"
OURS = [CaaIssuer("letsencrypt.org", ACCOUNT)]


class TestAccountsAndMethods:
    """RFC 8657: an ``issue`` record may bind its CA to one account and to validation methods."""

    @pytest.mark.gen_test
    async def test_a_record_bound_to_our_account_allows(self, checker, dns):
        dns.publish_caa("example.com", "issue", f"letsencrypt.org; accounturi={ACCOUNT}")
        assert (await preflight(checker, "shop.example.com", OURS)).allowed

    @pytest.mark.gen_test
    async def test_a_record_bound_to_another_account_forbids(self, checker, dns):
        dns.publish_caa("example.com", "issue", "letsencrypt.org; accounturi=https://acme-v02.api.letsencrypt.org/acme/acct/9")
        assert not (await preflight(checker, "shop.example.com", OURS)).allowed

    @pytest.mark.gen_test
    async def test_a_record_allowing_dns_01_allows(self, checker, dns):
        dns.publish_caa("example.com", "issue", "letsencrypt.org; validationmethods=http-01,dns-01")
        assert (await preflight(checker, "shop.example.com", OURS)).allowed

    @pytest.mark.gen_test
    async def test_a_record_allowing_only_other_methods_forbids(self, checker, dns):
        dns.publish_caa("example.com", "issue", "letsencrypt.org; validationmethods=http-01")
        assert not (await preflight(checker, "shop.example.com", OURS)).allowed

    @pytest.mark.gen_test
    async def test_records_bound_to_accounts_are_answered_with_the_exact_record_to_add(self, checker, dns):
        dns.publish_caa("example.com", "issue", "letsencrypt.org; accounturi=https://acme-v02.api.letsencrypt.org/acme/acct/9")
        verdict = await preflight(checker, "shop.example.com", OURS)
        assert f'example.com. CAA 0 issue "letsencrypt.org; accounturi={ACCOUNT}; validationmethods=dns-01"' in verdict.message

    @pytest.mark.gen_test
    async def test_the_verdict_names_the_issuers_the_records_permit(self, checker, dns):
        dns.publish_caa("example.com", "issue", "pki.goog")
        verdict = await preflight(checker, "shop.example.com", [*OURS, CaaIssuer("pki.goog")])
        assert verdict.permitted == ("pki.goog",)
