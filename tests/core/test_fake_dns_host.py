"""The fake DNS host of tests/servers/dns_host.py behaves as a strict Domain Connect DNS host.

Driven over real HTTPS (its test CA) with the apply URLs core.domain_connect signs; what it applies
is read back from the test DNS server by real DNS queries.
"""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from dnslib import DNSRecord
from tornado.httpclient import AsyncHTTPClient, HTTPResponse

from core.config import DomainConnectConfig
from core.domain_connect.signing import apply_url, public_key_records
from core.domain_connect.template import template, variables
from tests.servers.dns_host import AppliedRecord, FakeDnsHost

CONFIG = DomainConnectConfig(provider_id="operator-test.com", service_id="tls-hostname",
                             private_key_file="/unused.pem", key_host="keys.operator-test.com")
ZONE = "customer-test.com"
TARGET = "shop.customer-test.com.5e0c.dcv.example"
RETURN = "https://portal.operator-test.com/dc/done"
PARAMS = {"domain": ZONE, "host": "shop", **variables(TARGET, "abc123"),
          "redirect_uri": RETURN, "state": "s1"}


@pytest.fixture(scope="session")
def key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def dns_host(dns, key):
    host = FakeDnsHost(dns)
    host.host_zone(ZONE)
    host.install(template(CONFIG, redirect_domain="portal.operator-test.com"))
    dns.publish(f"_dck1.{CONFIG.key_host}", "TXT", *public_key_records(key.public_key()))
    yield host
    host.stop()


def signed(host, key, params=PARAMS):
    return apply_url(url_sync_ux=host.url_sync_ux, provider_id=CONFIG.provider_id,
                     service_id=CONFIG.service_id, params=params, key=key, key_label=CONFIG.key_label)


async def fetch(host, url, **kwargs) -> HTTPResponse:
    client = AsyncHTTPClient(force_instance=True, hostname_mapping={host.hostname: "127.0.0.1"})
    try:
        return await client.fetch(url, ca_certs=host.ca_pem_path, follow_redirects=False, raise_error=False,
                                  **kwargs)
    finally:
        client.close()


def answers(dns, name, rtype):
    reply = DNSRecord.parse(DNSRecord.question(name, rtype).send(dns.host, dns.port, timeout=2))
    return sorted(str(rr.rdata).strip('"').rstrip(".") for rr in reply.rr)


class TestApply:
    @pytest.mark.gen_test
    async def test_a_signed_url_shows_the_consent_page_and_changes_nothing_yet(self, dns, dns_host, key):
        response = await fetch(dns_host, signed(dns_host, key))
        page = response.body.decode()
        assert response.code == 200
        assert "DNS Host Test" in page and f"_acme-challenge.shop.{ZONE}" in page
        assert 'name="consent"' in page and "Cancel" in page
        assert answers(dns, f"_acme-challenge.shop.{ZONE}", "CNAME") == []

    @pytest.mark.gen_test
    async def test_connect_publishes_both_records_and_returns_with_the_state(self, dns, dns_host, key):
        response = await fetch(dns_host, signed(dns_host, key), method="POST", body="consent=yes")
        assert (response.code, response.headers["Location"]) == (302, f"{RETURN}?state=s1")
        assert answers(dns, f"_acme-challenge.shop.{ZONE}", "CNAME") == [TARGET]
        assert answers(dns, f"_service-verify.shop.{ZONE}", "TXT") == ["service-domain-verification=abc123"]
        assert dns_host.applied == [
            AppliedRecord("CNAME", f"_acme-challenge.shop.{ZONE}", TARGET, 300),
            AppliedRecord("TXT", f"_service-verify.shop.{ZONE}", "service-domain-verification=abc123", 300),
        ]

    @pytest.mark.gen_test
    async def test_the_zone_apex_gets_the_records_below_the_zone_itself(self, dns, dns_host, key):
        url = signed(dns_host, key, PARAMS | {"host": ""})
        assert (await fetch(dns_host, url, method="POST", body="consent=yes")).code == 302
        assert answers(dns, f"_acme-challenge.{ZONE}", "CNAME") == [TARGET]

    @pytest.mark.gen_test
    async def test_cancel_returns_access_denied_and_publishes_nothing(self, dns, dns_host, key):
        response = await fetch(dns_host, signed(dns_host, key), method="POST", body="cancel=yes")
        assert response.headers["Location"] == (
            f"{RETURN}?error=access_denied&error_description=user_cancel&state=s1")
        assert dns_host.applied == []

    @pytest.mark.gen_test
    async def test_auto_approve_applies_on_the_get(self, dns, dns_host, key):
        dns_host.auto_approve = True
        assert (await fetch(dns_host, signed(dns_host, key))).code == 302
        assert answers(dns, f"_acme-challenge.shop.{ZONE}", "CNAME") == [TARGET]


class TestRefusals:
    async def refused(self, dns_host, url) -> str:
        response = await fetch(dns_host, url, method="POST", body="consent=yes")
        assert response.code == 400
        assert dns_host.applied == []
        return response.body.decode()

    @pytest.mark.gen_test
    async def test_a_tampered_value_is_refused_and_nothing_is_published(self, dns, dns_host, key):
        url = signed(dns_host, key).replace("verifytoken=abc123", "verifytoken=evil")
        assert "signature does not verify" in await self.refused(dns_host, url)
        assert answers(dns, f"_service-verify.shop.{ZONE}", "TXT") == []

    @pytest.mark.gen_test
    async def test_a_re_encoded_query_is_refused_though_it_decodes_the_same(self, dns_host, key):
        url = signed(dns_host, key, PARAMS | {"verifytoken": "two words"})
        assert "verifytoken=two%20words&" in url
        assert "signature does not verify" in await self.refused(dns_host, url.replace("%20", "+"))

    @pytest.mark.gen_test
    async def test_a_url_whose_sig_is_not_last_is_refused(self, dns_host, key):
        url = signed(dns_host, key) + "&extra=1"
        assert "sig must be the last parameter" in await self.refused(dns_host, url)

    @pytest.mark.gen_test
    async def test_an_unsigned_url_is_refused(self, dns_host, key):
        url = signed(dns_host, key).rsplit("&key=", 1)[0]
        assert "signed request" in await self.refused(dns_host, url)

    @pytest.mark.gen_test
    async def test_a_key_missing_from_dns_is_refused(self, dns, dns_host, key):
        dns.remove(f"_dck1.{CONFIG.key_host}")
        assert "no public key" in await self.refused(dns_host, signed(dns_host, key))

    @pytest.mark.gen_test
    async def test_a_redirect_outside_the_sync_redirect_domain_is_refused(self, dns_host, key):
        url = signed(dns_host, key, PARAMS | {"redirect_uri": "https://evil-test.com/"})
        assert "syncRedirectDomain" in await self.refused(dns_host, url)

    @pytest.mark.gen_test
    async def test_a_zone_hosted_elsewhere_is_refused(self, dns_host, key):
        url = signed(dns_host, key, PARAMS | {"domain": "other-test.com"})
        assert "not hosted here" in await self.refused(dns_host, url)


class TestConflicts:
    @pytest.mark.gen_test
    async def test_prefix_mode_replaces_an_earlier_token_and_keeps_other_txt(self, dns, dns_host, key):
        name = f"_service-verify.shop.{ZONE}"
        dns.publish(name, "TXT", "service-domain-verification=old", "unrelated")
        await fetch(dns_host, signed(dns_host, key), method="POST", body="consent=yes")
        assert answers(dns, name, "TXT") == ["service-domain-verification=abc123", "unrelated"]

    @pytest.mark.gen_test
    async def test_cloudflare_like_keeps_earlier_tokens_and_drops_the_state(self, dns, dns_host, key):
        dns_host.cloudflare_like = True
        name = f"_service-verify.shop.{ZONE}"
        dns.publish(name, "TXT", "service-domain-verification=old")
        response = await fetch(dns_host, signed(dns_host, key), method="POST", body="consent=yes")
        assert response.headers["Location"] == RETURN
        assert answers(dns, name, "TXT") == [
            "service-domain-verification=abc123", "service-domain-verification=old"]

    @pytest.mark.gen_test
    async def test_the_cname_replaces_whatever_was_at_its_name(self, dns, dns_host, key):
        name = f"_acme-challenge.shop.{ZONE}"
        dns.publish(name, "TXT", "leftover-acme-token")
        await fetch(dns_host, signed(dns_host, key), method="POST", body="consent=yes")
        assert answers(dns, name, "TXT") == [TARGET]  # the CNAME answers every type
        assert list(dns.zone.records[name]) == ["CNAME"]


class TestApi:
    @pytest.mark.gen_test
    async def test_a_hosted_zone_has_settings(self, dns_host):
        response = await fetch(dns_host, f"{dns_host.url_api}/v2/{ZONE}/settings")
        settings = json.loads(response.body)
        assert (settings["urlSyncUX"], settings["urlAPI"]) == (dns_host.url_sync_ux, dns_host.url_api)
        assert dns_host.value() == dns_host.url_api.removeprefix("https://")

    @pytest.mark.gen_test
    async def test_another_zone_has_none(self, dns_host):
        assert (await fetch(dns_host, f"{dns_host.url_api}/v2/other-test.com/settings")).code == 404

    @pytest.mark.gen_test
    async def test_the_settings_override_is_served_instead(self, dns_host):
        dns_host.settings_override(b"", status=302, location="https://elsewhere-test.com/")
        response = await fetch(dns_host, f"{dns_host.url_api}/v2/{ZONE}/settings")
        assert (response.code, response.headers["Location"]) == (302, "https://elsewhere-test.com/")

    @pytest.mark.gen_test
    async def test_an_installed_template_answers_its_version(self, dns_host):
        path = f"/v2/domainTemplates/providers/{CONFIG.provider_id}/services/{CONFIG.service_id}"
        response = await fetch(dns_host, dns_host.url_api + path)
        assert json.loads(response.body) == {"version": 1}
        assert dns_host.requests[-1] == ("GET", "/api" + path, "")

    @pytest.mark.gen_test
    async def test_a_template_not_installed_is_not_found(self, dns_host):
        path = "/v2/domainTemplates/providers/operator-test.com/services/other"
        assert (await fetch(dns_host, dns_host.url_api + path)).code == 404
