"""The portal in a real headless browser (Debian's Chromium, driven by Playwright; no browser is
downloaded). The service runs as ``python app.py --config FILE`` with the built-in development
identity provider, the sandbox provider, and the test DNS server as its resolver.

The screenshots the documentation shows (docs/portal.md) are taken here; they are written to
tests/browser/screenshots/ when ``UPDATE_SCREENSHOTS=1`` is set (otherwise to the test's temporary
folder, so a test run leaves the checkout unchanged).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from tests.browser.steps import signed_up_and_in
from tests.servers.service import ServiceProcess

KEPT_SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"

pytestmark = needs_chromium


@pytest.fixture
def service(tmp_path, dns):
    running = ServiceProcess(tmp_path, dns_address=dns.address, dns_timeout=5.0,
                             extra="[provider.sandbox]\nactivation_delay_seconds = 1.0\n")
    yield running.start().base_url
    running.stop()


@pytest.fixture
def screenshots(tmp_path) -> Path:
    folder = KEPT_SCREENSHOTS if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = chromium.new_context(viewport={"width": 1000, "height": 1300})
        yield context
        chromium.close()


class TestFromSignUpToAnActiveCertificate:
    """What a new user does in the browser."""

    def test_sign_up_sign_in_publish_check_and_see_the_certificate_active(self, service, browser, dns, screenshots):
        browser.grant_permissions(["clipboard-read", "clipboard-write"], origin=service)
        page = browser.new_page()
        page.goto(service + "/")
        page.fill("input[name=email]", "me@shop-owner.com")
        page.fill("input[name=domain]", "shop.example.com")
        page.click("button:has-text('Sign up')")
        page.wait_for_selector("text=Welcome, me@shop-owner.com")
        page.click("a.button:has-text('Sign in')")
        # The development identity provider's form, with the e-mail already filled in.
        assert page.input_value("input[name=email]") == "me@shop-owner.com"
        page.click("button:has-text('Sign in')")
        page.wait_for_url("**/site/*/dns")
        assert page.inner_text("#validation-status") == "pending"

        # Copy both values as a person would, and publish them at "their DNS host".
        page.click("button[data-copy-from=delegation-value]")
        cname = page.evaluate("navigator.clipboard.readText()")
        assert cname == page.inner_text("#delegation-value")
        page.click("button[data-copy-from=ownership-value]")
        txt = page.evaluate("navigator.clipboard.readText()")
        assert page.inner_text("#delegation-relative") == "_acme-challenge.shop"
        dns.publish(page.inner_text("#delegation-host"), "CNAME", cname)
        dns.publish(page.inner_text("#ownership-host"), "TXT", txt)

        page.click("#check-now")
        page.wait_for_selector(".flash")
        assert page.inner_text("#validation-status") == "verified"
        assert page.inner_text("#cert-status") == "pending"

        time.sleep(1.1)  # the sandbox activates after provider.sandbox.activation_delay_seconds
        page.click("#check-now")
        page.wait_for_selector("#cert-status:has-text('active')")
        assert "Sandbox CA" in page.inner_text("#cert-summary")
        page.screenshot(path=str(screenshots / "dns-page.png"), full_page=True)

    def test_a_signed_out_visitor_to_the_dns_page_signs_in_and_comes_back(self, service, browser):
        page = browser.new_page()
        page.goto(service + "/")
        page.fill("input[name=email]", "back@shop-owner.com")
        page.fill("input[name=domain]", "back.example.com")
        page.click("button:has-text('Sign up')")
        portal_path = page.get_attribute("a.button:has-text('Sign in')", "href")
        fresh = browser.browser.new_context()
        try:
            visitor = fresh.new_page()
            target = service + "/site/" + portal_path.split("%2Fsite%2F")[1].split("%2Fdns")[0] + "/dns"
            visitor.goto(target)
            visitor.fill("input[name=email]", "back@shop-owner.com")
            visitor.click("button:has-text('Sign in')")
            visitor.wait_for_url(target)
            assert "back.example.com" in visitor.inner_text("h1")
        finally:
            fresh.close()


class TestTheDnsAdministratorsLink:
    """A DNS administrator without an account, from the link the owner shared."""

    def test_the_link_page_shows_the_records_and_verifies(self, service, browser, dns, screenshots):
        page = browser.new_page()
        signed_up_and_in(page, service, "owner@shop-owner.com", "www.example.com")
        page.fill("input[name=recipientEmail]", "dns-admin@customer-test.com")
        page.click("#share")
        link = page.inner_text("#link-1")

        admin = browser.browser.new_context(viewport={"width": 1000, "height": 1300})
        try:
            visit = admin.new_page()
            visit.goto(link)
            assert visit.inner_text("h1") == "www.example.com" and "Sign out" not in visit.content()
            dns.publish(visit.inner_text("#delegation-host"), "CNAME", visit.inner_text("#delegation-value"))
            dns.publish(visit.inner_text("#ownership-host"), "TXT", visit.inner_text("#ownership-value"))
            visit.click("#check-now")
            visit.wait_for_selector(".flash")
            assert visit.inner_text("#validation-status") == "verified"
            visit.screenshot(path=str(screenshots / "verification-link-page.png"), full_page=True)
        finally:
            admin.close()
