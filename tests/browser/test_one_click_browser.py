"""One-click DNS set-up (Domain Connect) in a real headless browser, from the DNS page to an active
certificate: the customer's browser goes to their DNS host's consent page and back.

The service runs as ``python app.py --config FILE`` (tests/servers/service.py) with one-click set-up
configured; the fake DNS host (tests/servers/dns_host.py) runs in this process over HTTPS on
127.0.0.1, hosting example.com with the operator's template deployed, and writes what the customer
approves into the test DNS server, which is the service's resolver. example.com's nameservers are
GoDaddy's, so the DNS page names GoDaddy as the DNS host.

The screenshots are written to tests/browser/screenshots/ with ``UPDATE_SCREENSHOTS=1`` (conftest.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from core.config import DomainConnectConfig
from core.domain_connect.signing import public_key_records
from core.domain_connect.template import template
from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from tests.browser.steps import signed_up_and_in
from tests.patience import PATIENCE_SECONDS
from tests.servers.dns_host import FakeDnsHost
from tests.servers.service import ServiceProcess

pytestmark = needs_chromium

ZONE = "example.com"
APEX = "shop.example.com"
GODADDY_NS = ("ns51.domaincontrol.com", "ns52.domaincontrol.com")
KEY_HOST = "keys.operator-test.com"
#: The service's portal_url is http://127.0.0.1:<port> (ServiceProcess sets only the port).
PORTAL_HOST = "127.0.0.1"


@pytest.fixture
def dns_host(dns):
    host = FakeDnsHost(dns)
    yield host
    host.stop()


@pytest.fixture
def domain_connect(tmp_path, dns, dns_host) -> DomainConnectConfig:
    """The operator's key pair and template: the key file for the service, the public key in DNS, the
    template deployed at the DNS host, which hosts example.com (at GoDaddy's nameservers)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file = tmp_path / "domain-connect.pem"
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    os.chmod(key_file, 0o600)
    config = DomainConnectConfig(provider_id="operator-test.com", service_id="tls-hostname",
                                 private_key_file=str(key_file), key_host=KEY_HOST)
    dns.publish(ZONE, "NS", *GODADDY_NS)
    dns.publish(f"{config.key_label}.{KEY_HOST}", "TXT", *public_key_records(key.public_key()))
    dns_host.host_zone(ZONE)
    dns_host.announce(ZONE)
    dns_host.install(template(config, redirect_domain=PORTAL_HOST))
    return config


@pytest.fixture
def service(tmp_path, dns, dns_host, domain_connect):
    extra = (
        "[provider.sandbox]\nactivation_delay_seconds = 1.0\n"
        f'[network]\nallow_private_ranges = ["127.0.0.0/8"]\nca_bundle = "{dns_host.ca_pem_path}"\n'
        f'[domain_connect]\nprovider_id = "{domain_connect.provider_id}"\nservice_id = "{domain_connect.service_id}"\n'
        f'private_key_file = "{domain_connect.private_key_file}"\nkey_host = "{domain_connect.key_host}"\n'
    )
    running = ServiceProcess(tmp_path, dns_address=dns.address, extra=extra)
    assert running.base_url.startswith(f"http://{PORTAL_HOST}:")  # the template's syncRedirectDomain
    yield running.start().base_url
    running.stop()


@pytest.fixture
def browser(dns_host):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # The DNS host's name resolves to the fake only inside this browser.
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=[
            *CHROMIUM_ARGS, f"--host-resolver-rules=MAP {dns_host.hostname} 127.0.0.1"])
        # The fake's certificate comes from a test CA this browser does not know. Ignoring that here
        # tests nothing less: the service itself checks the fake's certificate against that CA
        # ([network] ca_bundle), and the browser only shows the DNS host's consent page.
        context = chromium.new_context(viewport={"width": 1000, "height": 1300}, ignore_https_errors=True)
        context.set_default_timeout(10_000)  # a page that never comes fails in seconds, not Playwright's 30
        yield context
        chromium.close()


class TestOneClickSetUp:
    def test_connecting_at_the_dns_host_publishes_both_records_and_the_certificate_becomes_active(
            self, service, browser, dns_host, kept_screenshots: Path):
        page = browser.new_page()
        signed_up_and_in(page, service, "me@shop-owner.com", APEX)
        assert "Your DNS is at GoDaddy" in page.inner_text("#dns-host")
        assert page.inner_text("#one-click-button") == "Set up automatically at DNS Host Test Display"
        records = {(kind, page.get_attribute(f"#{which}-host", "data-value"),
                    page.get_attribute(f"#{which}-value", "data-value").rstrip("."))  # GoDaddy's CNAME: no dot
                   for which, kind in (("delegation", "CNAME"), ("ownership", "TXT"))}
        page.screenshot(path=str(kept_screenshots / "one-click-dns-page.png"), full_page=True)

        page.click("#one-click-button")
        page.wait_for_url(f"https://{dns_host.hostname}:{dns_host.port}/connect/**")
        page.click("button:has-text('Connect')")
        page.wait_for_url(f"{service}/connect/done?**")
        assert "DNS records in place" in page.inner_text("h1")
        assert {(r.type, r.name, r.value) for r in dns_host.applied} == records
        page.screenshot(path=str(kept_screenshots / "one-click-done.png"), full_page=True)

        page.click("#one-click-back")
        page.wait_for_url("**/site/*/dns")
        assert page.inner_text("#validation-status") == "verified"
        deadline = time.monotonic() + PATIENCE_SECONDS  # the sandbox activates 1 s after the order
        while page.inner_text("#cert-status") != "active" and time.monotonic() < deadline:
            time.sleep(0.3)
            page.click("#check-now")
            page.wait_for_selector(".flash")
        assert page.inner_text("#cert-status") == "active"

    def test_a_visit_to_the_return_page_from_elsewhere_leaves_the_set_up_usable(self, service, browser, dns_host):
        page = browser.new_page()
        signed_up_and_in(page, service, "me@shop-owner.com", APEX)
        page.click("#one-click-button")
        page.wait_for_url(f"https://{dns_host.hostname}:{dns_host.port}/connect/**")
        consent = page.url
        page.goto(service + "/connect/done")  # from the DNS host's origin: any site can navigate there
        assert page.inner_text("h1") == "Finish the one-click set-up"
        page.goto(consent)
        page.click("button:has-text('Connect')")
        page.wait_for_url(f"{service}/connect/done?**")
        assert "DNS records in place" in page.inner_text("h1")

    def test_a_cancelled_set_up_shows_what_the_dns_host_said_as_its_words(self, service, browser, dns_host):
        page = browser.new_page()
        signed_up_and_in(page, service, "me@shop-owner.com", APEX)
        page.click("#one-click-button")
        page.wait_for_url(f"https://{dns_host.hostname}:{dns_host.port}/connect/**")
        page.click("button:has-text('Cancel')")
        page.wait_for_url(f"{service}/connect/done?**")
        said = page.inner_text("#one-click-host-said")
        assert said.startswith("Your DNS host said, in its own words:") and "access_denied: user_cancel" in said
        assert dns_host.applied == []
