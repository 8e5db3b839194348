"""One-click DNS set-up (Domain Connect, synchronous flow) from start to a verified domain.

Real parts only: the test DNS server plays the resolver and publishes the zone's NS records,
``_domainconnect.example.com`` and the operator's public key; a fake DNS host (tests/servers/dns_host.py,
HTTPS with a test CA) answers the settings and the template check, verifies the signature of the
apply URL with the published key as a DNS host does, writes the records into the test DNS server
and sends the browser back to ``redirect_uri``. The service then checks DNS itself.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from urllib.parse import parse_qsl, urlsplit

import attrs
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from tornado.httpclient import AsyncHTTPClient

from core.config import DomainConnectConfig, NetworkConfig
from core.domain_connect.signing import public_key_records
from core.domain_connect.template import template
from core.lifecycle.watcher import LifecycleWatcher
from core.runtime.assembly import build_services
from core.verification import one_click
from tests.pages import conftest as page_fixtures
from tests.pages.portal_client import Browser, sign_in
from tests.servers.dns_host import FakeDnsHost
from tests.servers.service import free_port

browser = page_fixtures.browser  # the portal tests' browser without JavaScript

APEX = "shop.example.com"
ZONE = "example.com"
GODADDY_NS = ("ns51.domaincontrol.com", "ns52.domaincontrol.com")
KEY_HOST = "keys.operator-test.com"


@pytest.fixture(scope="session")
def signing_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def dns_host(dns_server):
    host = FakeDnsHost(dns_server)
    yield host
    host.stop()


@pytest.fixture
def key_file(tmp_path, signing_key):
    path = tmp_path / "domain-connect.pem"
    path.write_bytes(signing_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    os.chmod(path, 0o600)
    return str(path)


@pytest.fixture
def domain_connect(key_file):
    return DomainConnectConfig(provider_id="operator-test.com", service_id="tls-hostname",
                               private_key_file=key_file, key_host=KEY_HOST)


@pytest.fixture
def config(config, dns_host, domain_connect):
    network = NetworkConfig(allow_private_ranges=["127.0.0.0/8"], ca_bundle=dns_host.ca_pem_path)
    return attrs.evolve(config, network=network, domain_connect=domain_connect)


@pytest.fixture
def supported(dns, dns_host, config, signing_key):
    """example.com at GoDaddy's nameservers, its DNS host offering the operator's template."""
    dns_host.reset()
    dns_host.auto_approve, dns_host.cloudflare_like = True, False
    dns.publish(ZONE, "NS", *GODADDY_NS)
    dns.publish(f"_dck1.{KEY_HOST}", "TXT", *public_key_records(signing_key.public_key()))
    dns_host.host_zone(ZONE)
    dns_host.announce(ZONE)
    dns_host.install(template(config.domain_connect, redirect_domain=urlsplit(config.server.portal_url).hostname))
    return dns_host


async def new_domain(api, owner, apex=APEX):
    r = await api.post("/v1/domains", {"apex": apex}, token=owner.token)
    assert r.status == 201, r.body
    return r.body


async def looked_at(api, owner, domain):
    """The domain after a check found its records missing (which names its DNS host)."""
    await api.post(f"/v1/domains/{domain['id']}/verify-delegation", token=owner.token)
    return (await api.get(f"/v1/domains/{domain['id']}", token=owner.token)).body


def refusing(dns, dns_host):
    """example.com's ``_domainconnect`` names the DNS host's name at a port where nothing listens."""
    dns.remove(f"_domainconnect.{ZONE}")
    dns.publish(f"_domainconnect.{ZONE}", "TXT", f"{dns_host.hostname}:{free_port()}/api")


async def start(api, owner, domain):
    r = await api.post(f"/v1/domains/{domain['id']}/one-click", token=owner.token)
    assert r.status == 200, r.body
    return r.body


async def at_dns_host(dns_host, url, method="GET", body=None):
    """The customer's browser at their DNS host (its consent page, or the auto-approved apply)."""
    client = AsyncHTTPClient(force_instance=True, hostname_mapping={dns_host.hostname: "127.0.0.1"})
    try:
        return await client.fetch(url, method=method, body=body, ca_certs=dns_host.ca_pem_path,
                                  follow_redirects=False, raise_error=False)
    finally:
        client.close()


class Page:
    def __init__(self, response) -> None:
        self.status, self.text = response.code, response.body.decode()


async def visit(http_client, base_url, path) -> Page:
    """A page of the portal, as a browser without cookies opens it."""
    return Page(await http_client.fetch(base_url + path, follow_redirects=False, raise_error=False))


def back_here(location: str) -> str:
    """The path and query of the DNS host's redirect to ``redirect_uri`` (the portal, here on the test port)."""
    parts = urlsplit(location)
    assert parts.path == "/connect/done", location
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


class TestOffer:
    @pytest.mark.gen_test
    async def test_a_domain_whose_dns_host_applies_the_template_offers_one_click(self, api, world, supported):
        owner = world.owner()
        host = (await looked_at(api, owner, await new_domain(api, owner)))["dnsHost"]
        assert host["name"] == "GoDaddy"
        assert host["oneClick"]["providerName"] == "DNS Host Test Display"
        assert host["oneClick"]["opens"] == supported.hostname
        assert host["oneClick"]["url"].endswith("/one-click")

    @pytest.mark.gen_test
    async def test_a_dns_host_without_the_template_offers_none_and_says_why(self, api, world, supported):
        supported.reset()
        supported.host_zone(ZONE)  # hosts the zone, but the operator's template is not deployed there
        owner = world.owner()
        domain = await looked_at(api, owner, await new_domain(api, owner))
        assert "oneClick" not in domain["dnsHost"]
        r = await api.post(f"/v1/domains/{domain['id']}/one-click", token=owner.token)
        assert (r.status, r.code) == (409, "one_click_unavailable") and "by hand" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_template_deployed_later_is_offered_once_the_zones_answer_is_old(
            self, api, world, supported, config, clock):
        supported.reset()  # the host serves the zone, without the template
        supported.host_zone(ZONE)
        owner = world.owner()
        domain = await looked_at(api, owner, await new_domain(api, owner))
        assert "oneClick" not in domain["dnsHost"]
        supported.install(template(config.domain_connect, redirect_domain=urlsplit(config.server.portal_url).hostname))
        clock.advance(config.domain_connect.cache_seconds + 1)
        assert (await start(api, owner, domain))["providerName"] == "DNS Host Test Display"

    @pytest.mark.gen_test
    async def test_an_unanswered_template_check_takes_no_offer_away(self, api, world, supported, config, clock):
        owner = world.owner()
        domain = await looked_at(api, owner, await new_domain(api, owner))
        supported.template_check_status(500)
        clock.advance(config.domain_connect.cache_seconds + 1)
        assert (await start(api, owner, domain))["providerName"] == "DNS Host Test Display"

    @pytest.mark.gen_test
    async def test_without_a_domainconnect_record_one_click_is_not_offered(self, api, world, supported, dns):
        dns.remove(f"_domainconnect.{ZONE}")
        owner = world.owner()
        domain = await looked_at(api, owner, await new_domain(api, owner))
        assert domain["dnsHost"]["name"] == "GoDaddy" and "oneClick" not in domain["dnsHost"]

    @pytest.mark.gen_test
    async def test_a_dns_host_not_answering_makes_one_click_unknown_not_unoffered(self, api, world, supported, dns):
        refusing(dns, supported)
        owner = world.owner()
        host = (await looked_at(api, owner, await new_domain(api, owner)))["dnsHost"]
        assert host["oneClickUnknown"] is True and "oneClick" not in host

    @pytest.mark.gen_test
    async def test_a_start_while_the_dns_host_does_not_answer_says_it_could_not_be_checked(
            self, api, world, supported, dns):
        refusing(dns, supported)
        owner = world.owner()
        r = await api.post(f"/v1/domains/{(await new_domain(api, owner))['id']}/one-click", token=owner.token)
        assert (r.status, r.code) == (409, "one_click_unavailable")
        assert "could not be checked just now" in r.body["message"] and "does not offer" not in r.body["message"]

    @pytest.mark.gen_test
    async def test_an_oversized_settings_document_is_ignored_and_the_diagnosis_says_so(self, api, world, supported):
        supported.settings_override(b"{" + b" " * 70_000 + b"}")
        owner = world.owner()
        domain = await new_domain(api, owner)
        report = (await api.get(f"/v1/domains/{domain['id']}/diagnosis", token=owner.token)).body
        [finding] = [f for f in report["findings"] if f["code"] == "one_click_ignored"]
        assert "64 KiB" in finding["message"] and "by hand" in finding["message"]
        assert "oneClick" not in (await api.get(f"/v1/domains/{domain['id']}", token=owner.token)).body["dnsHost"]


class TestBulk:
    """A bulk of hostnames in zones whose ``_domainconnect`` names some server: no request goes
    there until a person looks at one of them."""

    ZONES = ("bulk0-test.com", "bulk1-test.com", "bulk2-test.com")

    @pytest.fixture
    def bulk(self, dns, supported):
        for zone in self.ZONES:
            dns.publish(zone, "NS", *GODADDY_NS)
            supported.host_zone(zone)
            supported.announce(zone)
        return [f"shop.{zone}" for zone in self.ZONES]

    @staticmethod
    async def created_and_checked(api, owner, bulk, services, clock):
        """The hostnames created in one bulk request, then each checked by the background checks."""
        r = await api.post("/v1/domains/bulk", {"apexList": bulk}, token=owner.token)
        assert len(r.body["created"]) == len(bulk), r.body
        clock.advance(3600)
        await LifecycleWatcher(services).tick()
        return [(await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body for d in r.body["created"]]

    @pytest.mark.gen_test
    async def test_a_bulk_create_and_its_background_checks_send_no_request_to_the_dns_hosts(
            self, api, world, supported, bulk, services, clock):
        await self.created_and_checked(api, world.owner(), bulk, services, clock)
        assert supported.requests == []

    @pytest.mark.gen_test
    async def test_its_domains_dns_host_is_known_and_what_it_offers_is_not_yet(
            self, api, world, supported, bulk, services, clock):
        domains = await self.created_and_checked(api, world.owner(), bulk, services, clock)
        assert [(d["dnsHost"]["name"], d["dnsHost"].get("oneClickUnknown")) for d in domains] == [("GoDaddy", True)] * 3

    @pytest.mark.gen_test
    async def test_a_person_looking_at_one_of_them_asks_its_dns_host(
            self, api, world, supported, bulk, services, clock):
        owner = world.owner()
        domains = await self.created_and_checked(api, owner, bulk, services, clock)
        host = (await looked_at(api, owner, domains[0]))["dnsHost"]
        assert "oneClickUnknown" not in host and host["oneClick"]["providerName"] == "DNS Host Test Display"


class TestStart:
    @pytest.mark.gen_test
    async def test_the_apply_url_carries_only_the_records_variables_the_zone_and_the_return(
            self, api, world, supported, config):
        owner = world.owner()
        domain = await new_domain(api, owner)
        started = await start(api, owner, domain)
        url = urlsplit(started["url"])
        assert f"{url.scheme}://{url.netloc}" == f"https://{supported.hostname}:{supported.port}"
        assert url.path == "/connect/v2/domainTemplates/providers/operator-test.com/services/tls-hostname/apply"
        query = dict(parse_qsl(url.query))
        assert sorted(query) == ["dcvtarget", "domain", "host", "key", "redirect_uri", "sig", "state", "verifytoken"]
        assert (query["domain"], query["host"], query["key"]) == (ZONE, "shop", "_dck1")
        assert query["dcvtarget"] == domain["validation"]["delegation"]["value"]
        assert "service-domain-verification=" + query["verifytoken"] == domain["validation"]["ownership"]["value"]
        assert query["redirect_uri"] == config.server.portal_url + "/connect/done"
        assert url.query.endswith("&sig=" + url.query.rsplit("&sig=", 1)[1])

    @pytest.mark.gen_test
    async def test_each_start_has_its_own_state(self, api, world, supported):
        owner = world.owner()
        domain = await new_domain(api, owner)
        states = {dict(parse_qsl(urlsplit((await start(api, owner, domain))["url"]).query))["state"] for _ in range(3)}
        assert len(states) == 3

    @pytest.mark.gen_test
    async def test_another_workspaces_domain_is_404(self, api, world, supported):
        domain = await new_domain(api, world.owner())
        r = await api.post(f"/v1/domains/{domain['id']}/one-click", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_read_only_may_not_start(self, api, world, supported):
        owner = world.owner()
        domain = await new_domain(api, owner)
        reader = world.member(owner.workspace, "read_only")
        r = await api.post(f"/v1/domains/{domain['id']}/one-click", token=reader.token)
        assert (r.status, r.code) == (403, "forbidden")

    @pytest.mark.gen_test
    async def test_a_verified_domain_is_not_offered_one_click(self, api, world, supported):
        owner = world.owner()
        domain = await new_domain(api, owner)
        await self.set_up(api, owner, domain, supported)
        r = await api.post(f"/v1/domains/{domain['id']}/one-click", token=owner.token)
        assert (r.status, r.code) == (409, "one_click_unavailable") and "already in place" in r.body["message"]

    @staticmethod
    async def set_up(api, owner, domain, dns_host):
        started = await start(api, owner, domain)
        answer = await at_dns_host(dns_host, started["url"])
        assert answer.code == 302, answer.body
        return await visit(api.client, api.base_url, back_here(answer.headers["Location"]))


class TestReturn:
    @pytest.mark.gen_test
    async def test_approved_records_are_checked_by_our_own_lookup_and_the_domain_is_verified(
            self, api, world, supported):
        owner = world.owner()
        domain = await new_domain(api, owner)
        page = await TestStart.set_up(api, owner, domain, supported)
        assert page.status == 200 and "DNS records in place" in page.text
        assert {(r.type, r.name) for r in supported.applied} == {
            ("CNAME", f"_acme-challenge.{APEX}"), ("TXT", f"_service-verify.{APEX}")}
        after = (await api.get(f"/v1/domains/{domain['id']}", token=owner.token)).body
        assert after["validation"]["status"] == "verified" and after["cert"]["status"] != "none"

    @pytest.mark.gen_test
    async def test_a_return_link_works_once(self, api, world, supported):
        owner = world.owner()
        domain = await new_domain(api, owner)
        started = await start(api, owner, domain)
        location = back_here((await at_dns_host(supported, started["url"])).headers["Location"])
        assert (await visit(api.client, api.base_url, location)).status == 200
        again = await visit(api.client, api.base_url, location)
        assert again.status == 400 and "This return link cannot be used" in again.text

    @pytest.mark.gen_test
    async def test_a_return_after_thirty_minutes_cannot_be_used_and_the_purge_forgets_it(
            self, api, world, supported, services, clock):
        owner = world.owner()
        domain = await new_domain(api, owner)
        location = back_here((await at_dns_host(supported, (await start(api, owner, domain))["url"])).headers["Location"])
        clock.advance(30 * 60 + 1)
        assert one_click.purge(services) == 1
        page = await visit(api.client, api.base_url, location)
        assert page.status == 400 and "This return link cannot be used" in page.text

    @pytest.mark.gen_test
    async def test_a_return_without_a_state_checks_nothing(self, api, world, supported):
        page = await visit(api.client, api.base_url, "/connect/done")
        assert page.status == 400 and "No set-up to finish" in page.text

    @pytest.mark.gen_test
    async def test_a_return_with_a_state_not_of_ours_checks_nothing(self, api, world, supported):
        page = await visit(api.client, api.base_url, "/connect/done?state=forged&error=%3Cscript%3E")
        assert page.status == 400 and "This return link cannot be used" in page.text and "<script>" not in page.text

    @pytest.mark.gen_test
    async def test_a_cancelled_set_up_leaves_the_domain_pending(self, api, world, supported):
        supported.auto_approve = False
        owner = world.owner()
        domain = await new_domain(api, owner)
        started = await start(api, owner, domain)
        answer = await at_dns_host(supported, started["url"], method="POST", body="cancel=yes")
        page = await visit(api.client, api.base_url, back_here(answer.headers["Location"]))
        assert "not there yet" in page.text
        after = (await api.get(f"/v1/domains/{domain['id']}", token=owner.token)).body
        assert after["validation"]["status"] == "pending" and supported.applied == []

    @pytest.mark.gen_test
    async def test_text_in_a_return_link_is_not_shown_to_a_browser_that_did_not_start_the_set_up(
            self, api, world, supported):
        owner = world.owner()  # anyone: a state of their own domain, in a link sent to someone else
        state = dict(parse_qsl(urlsplit((await start(api, owner, await new_domain(api, owner)))["url"]).query))["state"]
        page = await visit(api.client, api.base_url, f"/connect/done?state={state}&error=Call+0800+123+456"
                                                     "&error_description=Your+account+is+locked")
        assert "not there yet" in page.text
        assert "0800" not in page.text and "locked" not in page.text and "Your DNS host said" not in page.text

    @pytest.mark.gen_test
    async def test_a_check_asked_for_without_a_set_up_started_in_this_browser_checks_nothing(
            self, api, world, supported, browser):
        page = await browser.post("/connect/done")
        assert page.code == 400 and "No set-up to finish" in page.body.decode()

    @pytest.mark.gen_test
    async def test_a_redirect_claiming_success_without_the_records_verifies_nothing(self, api, world, supported):
        supported.auto_approve = False
        owner = world.owner()
        domain = await new_domain(api, owner)
        state = dict(parse_qsl(urlsplit((await start(api, owner, domain))["url"]).query))["state"]
        page = await visit(api.client, api.base_url, f"/connect/done?state={state}")  # typed by hand: the host never applied anything
        assert "not there yet" in page.text
        assert (await api.get(f"/v1/domains/{domain['id']}", token=owner.token)).body["validation"]["status"] == "pending"


class TestInThePortal:
    @pytest.mark.gen_test
    async def test_the_dns_page_offers_the_button_and_it_leads_to_the_dns_host(self, api, world, supported,
                                                                                browser, services):
        owner = world.owner()
        domain = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{domain['id']}/dns")).body.decode()
        assert "Set up automatically at DNS Host Test Display" in page
        answer = await browser.submit(f"/site/{domain['id']}/dns", f"/site/{domain['id']}/one-click")
        assert answer.code == 303 and answer.headers["Location"].startswith(supported.url_sync_ux + "/v2/")

    @pytest.mark.gen_test
    async def test_the_page_with_the_button_lets_its_form_lead_to_the_dns_host_and_nowhere_else(
            self, api, world, supported, browser, services):
        owner = world.owner()
        domain = await new_domain(api, owner)
        sign_in(browser, services, owner)
        csp = (await browser.get(f"/site/{domain['id']}/dns")).headers["Content-Security-Policy"]
        assert f"form-action 'self' https://{supported.hostname}:{supported.port};" in csp

    @pytest.mark.gen_test
    async def test_a_dns_host_that_drops_the_state_is_followed_by_a_check_of_this_browsers_set_up(
            self, api, world, supported, browser, services):
        supported.cloudflare_like = True
        owner = world.owner()
        domain = await new_domain(api, owner)
        back = await self.started_here(browser, services, owner, domain, supported)
        assert "state=" not in back
        offered = await browser.get(back)
        assert offered.code == 200 and "Finish the one-click set-up" in offered.body.decode()
        page = await browser.submit(back, "/connect/done")
        assert page.code == 200 and "DNS records in place" in page.body.decode()
        assert f'href="/site/{domain["id"]}/dns"' in page.body.decode()

    @pytest.mark.gen_test
    async def test_a_visit_without_a_state_leaves_this_browsers_set_up_usable(
            self, api, world, supported, browser, services):
        owner = world.owner()
        domain = await new_domain(api, owner)
        back = await self.started_here(browser, services, owner, domain, supported)
        await browser.get("/connect/done")  # a link, or a navigation made by any other site
        page = await browser.get(back)
        assert "DNS records in place" in page.body.decode()

    @pytest.mark.gen_test
    async def test_a_visit_with_another_state_leaves_this_browsers_set_up_usable(
            self, api, world, supported, browser, services):
        owner = world.owner()
        domain = await new_domain(api, owner)
        theirs = dict(parse_qsl(urlsplit((await start(api, owner, await new_domain(api, owner, "other.example.com")))
                                          ["url"]).query))["state"]
        back = await self.started_here(browser, services, owner, domain, supported)
        await browser.get(f"/connect/done?state={theirs}")
        page = await browser.get(back)
        assert "DNS records in place" in page.body.decode() and f'href="/site/{domain["id"]}/dns"' in page.body.decode()

    @pytest.mark.gen_test
    async def test_what_the_dns_host_said_is_shown_to_the_browser_that_started_as_its_words(
            self, api, world, supported, browser, services):
        supported.auto_approve = False
        owner = world.owner()
        domain = await new_domain(api, owner)
        sign_in(browser, services, owner)
        answer = await browser.submit(f"/site/{domain['id']}/dns", f"/site/{domain['id']}/one-click")
        cancelled = await at_dns_host(supported, answer.headers["Location"], method="POST", body="cancel=yes")
        page = (await browser.get(back_here(cancelled.headers["Location"]))).body.decode()
        said = page.split('id="one-click-host-said"', 1)[1].split("</figure>", 1)[0]
        assert "Your DNS host said, in its own words" in said and "<blockquote><code>access_denied</code>: user_cancel" in said
        assert "cancelled there" in said and "not there yet" in page

    @staticmethod
    async def started_here(browser, services, owner, domain, dns_host) -> str:
        """Where the DNS host sends back the browser that started a set-up from the DNS page (approved)."""
        sign_in(browser, services, owner)
        answer = await browser.submit(f"/site/{domain['id']}/dns", f"/site/{domain['id']}/one-click")
        return back_here((await at_dns_host(dns_host, answer.headers["Location"])).headers["Location"])

    @pytest.mark.gen_test
    async def test_the_dns_page_says_when_one_click_could_not_be_checked(self, api, world, supported, dns,
                                                                         browser, services):
        refusing(dns, supported)
        owner = world.owner()
        domain = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{domain['id']}/dns")).body.decode()
        assert 'id="one-click-unknown"' in page and "could not be\nchecked just now" in page
        assert "one-click-button" not in page

    @pytest.mark.gen_test
    async def test_a_read_only_member_sees_no_button(self, api, world, supported, browser, services):
        owner = world.owner()
        domain = await new_domain(api, owner)
        sign_in(browser, services, world.member(owner.workspace, "read_only"))
        page = (await browser.get(f"/site/{domain['id']}/dns")).body.decode()
        assert "Your DNS is at <strong>GoDaddy</strong>" in page and "one-click-button" not in page

    @pytest.mark.gen_test
    async def test_the_holder_of_a_verification_link_can_set_it_up(self, api, world, supported, http_client, base_url):
        owner = world.owner()
        domain = await new_domain(api, owner)
        link = (await api.post("/v1/verification-links", {"domainId": domain["id"]}, token=owner.token)).body
        token = link["url"].rsplit("/", 1)[1]
        visitor = Browser(http_client, base_url)
        assert "Set up automatically at" in (await visitor.get(f"/verify/{token}")).body.decode()
        answer = await visitor.submit(f"/verify/{token}", f"/verify/{token}/one-click")
        back = await at_dns_host(supported, answer.headers["Location"])
        page = (await visitor.get(back_here(back.headers["Location"]))).body.decode()
        assert "DNS records in place" in page and f'href="/verify/{token}"' in page


class TestOperator:
    @pytest.mark.gen_test
    async def test_without_configuration_one_click_is_refused_and_offers_found_before_are_forgotten(
            self, api, world, supported, config, services):
        owner = world.owner()
        domain = await looked_at(api, owner, await new_domain(api, owner))
        assert "oneClick" in domain["dnsHost"]
        row = await restarted_without_configuration(config, services, owner, domain)
        assert row.dns_host.offer is None and row.dns_host.host == "godaddy"

    @pytest.mark.gen_test
    async def test_without_configuration_an_offer_not_known_is_forgotten_too(
            self, api, world, supported, dns, config, services):
        refusing(dns, supported)
        owner = world.owner()
        domain = await looked_at(api, owner, await new_domain(api, owner))
        assert domain["dnsHost"]["oneClickUnknown"] is True
        row = await restarted_without_configuration(config, services, owner, domain)
        assert not row.dns_host.offer_unknown and row.dns_host.host == "godaddy"


async def restarted_without_configuration(config, services, owner, domain):
    """The service started again with one-click set-up off: what it reads of the domain."""

    def restart():  # off the event loop, as it starts
        off = build_services(attrs.evolve(config, domain_connect=DomainConnectConfig()), clock=services.clock)
        try:
            return off.store.domains.get(owner.workspace.id, uuid.UUID(domain["id"]))
        finally:
            off.close()

    return await asyncio.get_running_loop().run_in_executor(None, restart)
