"""The customer's DNS host, named from the zone's NS records (core/verification/dns_host.py), in
the Domain (``dnsHost``), on the DNS page, on the verification link's page, in the reminder
e-mail and in the diagnosis; unknown hosts keep the generic wording.

The test DNS server plays the resolver and publishes the zone's NS records, as a real one would.
"""

from __future__ import annotations

import attrs
import pytest

from core.config import SmtpConfig
from tests.api import test_verification_links as link_fixtures
from tests.pages.portal_client import sign_in

APEX = "shop.example.com"
CLOUDFLARE_NS = ("kim.ns.cloudflare.com", "lars.ns.cloudflare.com")
HETZNER_NS = ("hydrogen.ns.hetzner.com", "oxygen.ns.hetzner.com", "helium.ns.hetzner.de")


smtp_server, smtp = link_fixtures.smtp_server, link_fixtures.smtp  # the link tests' SMTP server


@pytest.fixture
def config(config, smtp):
    return attrs.evolve(config, smtp=SmtpConfig(host=smtp.host, port=smtp.port, starttls=False, timeout_seconds=2))


def hosted_at(dns, nameservers, zone="example.com"):
    dns.publish(zone, "NS", *nameservers)


async def new_domain(api, owner, apex=APEX):
    r = await api.post("/v1/domains", {"apex": apex}, token=owner.token)
    assert r.status == 201, r.body
    return r.body


async def checked(api, owner, domain):
    """verify-delegation with the records not published: the check walks to the zone."""
    r = await api.post(f"/v1/domains/{domain['id']}/verify-delegation", token=owner.token)
    assert r.status == 200, r.body
    return (await api.get(f"/v1/domains/{domain['id']}", token=owner.token)).body


class TestInTheApi:
    @pytest.mark.gen_test
    async def test_a_new_domain_has_no_dns_host_until_it_is_looked_at(self, api, world, dns):
        hosted_at(dns, CLOUDFLARE_NS)
        domain = await new_domain(api, world.owner())
        assert "dnsHost" not in domain

    @pytest.mark.gen_test
    async def test_a_check_that_finds_a_record_missing_names_the_dns_host(self, api, world, dns):
        hosted_at(dns, CLOUDFLARE_NS)
        owner = world.owner()
        host = (await checked(api, owner, await new_domain(api, owner)))["dnsHost"]
        assert (host["key"], host["name"], host["zone"], host["panelNameForm"]) == (
            "cloudflare", "Cloudflare", "example.com", "relative")
        assert host["records"]["delegation"]["name"] == "_acme-challenge.shop"
        assert host["records"]["ownership"]["name"] == "_service-verify.shop"
        assert any("DNS only" in gotcha for gotcha in host["gotchas"])
        assert host["helpUrl"].startswith("https://developers.cloudflare.com/")
        assert "oneClick" not in host  # [domain_connect] is off

    @pytest.mark.gen_test
    async def test_the_zone_is_the_one_dns_delegates_not_the_registrable_domain(self, api, world, dns):
        hosted_at(dns, CLOUDFLARE_NS, zone="shop.example.com")  # a delegated sub-zone
        owner = world.owner()
        host = (await checked(api, owner, await new_domain(api, owner)))["dnsHost"]
        assert (host["zone"], host["records"]["delegation"]["name"]) == ("shop.example.com", "_acme-challenge")

    @pytest.mark.gen_test
    async def test_a_walk_that_ends_on_a_public_suffix_found_no_zone(self, api, world, dns):
        dns.publish("co.uk", "NS", *CLOUDFLARE_NS)  # the customer's own domain does not answer
        owner = world.owner()
        assert "dnsHost" not in await checked(api, owner, await new_domain(api, owner, apex="shop.customer.co.uk"))

    @pytest.mark.gen_test
    async def test_a_host_that_reads_targets_as_relative_gets_a_trailing_dot(self, api, world, dns):
        hosted_at(dns, HETZNER_NS)
        owner = world.owner()
        domain = await new_domain(api, owner)
        host = (await checked(api, owner, domain))["dnsHost"]
        assert host["records"]["delegation"]["value"] == domain["validation"]["delegation"]["value"] + "."

    @pytest.mark.gen_test
    async def test_unknown_nameservers_keep_the_generic_relative_names(self, api, world, dns):
        hosted_at(dns, ("ns1.example-dns-host.net", "ns2.example-dns-host.net"))
        owner = world.owner()
        host = (await checked(api, owner, await new_domain(api, owner)))["dnsHost"]
        assert "key" not in host and "name" not in host and host["gotchas"] == []
        assert (host["panelNameForm"], host["records"]["delegation"]["name"]) == ("relative", "_acme-challenge.shop")

    @pytest.mark.gen_test
    async def test_the_diagnosis_names_the_dns_host(self, api, world, dns):
        hosted_at(dns, CLOUDFLARE_NS)
        owner = world.owner()
        domain = await new_domain(api, owner)
        report = (await api.get(f"/v1/domains/{domain['id']}/diagnosis", token=owner.token)).body
        assert report["dnsHostName"] == "Cloudflare"
        assert (await api.get(f"/v1/domains/{domain['id']}", token=owner.token)).body["dnsHost"]["key"] == "cloudflare"


class TestOnThePages:
    @pytest.mark.gen_test
    async def test_the_dns_page_says_where_the_dns_is_and_names_records_as_its_panel_wants(
            self, api, world, dns, browser, services):
        hosted_at(dns, CLOUDFLARE_NS)
        owner = world.owner()
        domain = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{domain['id']}/dns")).body.decode()
        assert "Your DNS is at <strong>Cloudflare</strong>" in page
        assert 'data-value="_acme-challenge.shop"' in page and "DNS only" in page

    @pytest.mark.gen_test
    async def test_the_dns_page_of_an_unknown_host_keeps_the_generic_wording(self, api, world, dns, browser, services):
        owner = world.owner()
        domain = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{domain['id']}/dns")).body.decode()
        assert "Your DNS is at" not in page and "Most DNS panels ask for the name relative to the zone" in page

    @pytest.mark.gen_test
    async def test_the_verification_link_page_says_where_the_dns_is(self, api, world, dns, browser):
        hosted_at(dns, HETZNER_NS)
        owner = world.owner()
        domain = await new_domain(api, owner)
        link = (await api.post("/v1/verification-links", {"domainId": domain["id"]}, token=owner.token)).body
        page = (await browser.get("/verify/" + link["url"].rsplit("/", 1)[1])).body.decode()
        assert "Your DNS is at <strong>Hetzner" in page
        assert f'data-value="{domain["validation"]["delegation"]["value"]}."' in page

    @pytest.mark.gen_test
    async def test_the_reminder_says_where_the_dns_is_with_its_names(self, api, world, dns, smtp):
        hosted_at(dns, CLOUDFLARE_NS)
        owner = world.owner()
        domain = await new_domain(api, owner)
        await checked(api, owner, domain)
        link = (await api.post("/v1/verification-links", {"domainId": domain["id"], "recipientEmail": "dns@example.com"},
                               token=owner.token)).body
        assert (await api.post(f"/v1/verification-links/{link['id']}/remind", token=owner.token)).status == 200
        [message] = smtp.messages
        text = message.get_content()
        assert "Your DNS is at Cloudflare" in text
        assert "Name:  _acme-challenge.shop   (in full: _acme-challenge.shop.example.com)" in text

    @pytest.mark.gen_test
    async def test_a_page_that_found_no_zone_does_not_ask_dns_again_for_ten_minutes(
            self, api, world, dns, browser, services, clock):
        owner = world.owner()
        domain = await new_domain(api, owner, apex="shop.not-in-dns.com")
        sign_in(browser, services, owner)

        async def ns_queries_of_a_view():
            before = len(dns.zone.queries)
            await browser.get(f"/site/{domain['id']}/dns")
            return [q for q in dns.zone.queries[before:] if q[1] == "NS"]

        assert await ns_queries_of_a_view()
        clock.advance(300)
        assert await ns_queries_of_a_view() == []
        clock.advance(301)
        assert await ns_queries_of_a_view()
