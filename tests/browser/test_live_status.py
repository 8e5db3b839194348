"""A domain's page and the domains list refreshing their own status in a real browser
(static/portal.js), as a newcomer sees it with the sandbox's simulated DNS: added in the portal,
then verified by the first background check and its certificate made active by a later one, with
no click and no reload.

The service's checks are seconds apart here (``[lifecycle] interval_seconds = 2``), the simulated
records count as published at once, and a sandbox certificate turns active two seconds after it
is requested. The screenshots of a page with simulated DNS are taken here (``dns-simulated-*.png``).
"""

from __future__ import annotations

import pytest

from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from tests.browser.steps import signed_up_and_in
from tests.browser.test_portal_pages import WIDTHS, assert_accessible, assert_fits
from tests.patience import PATIENCE_SECONDS
from tests.servers.service import ServiceProcess

pytestmark = needs_chromium

SIMULATED = ("[provider.sandbox]\nsimulate_dns = true\nsimulate_dns_delay_seconds = 0\nactivation_delay_seconds = 2\n"
             "[lifecycle]\ninterval_seconds = 2\n")
#: Long enough for two background checks and a poll after each, on a busy machine.
WAIT_MS = PATIENCE_SECONDS * 1000


@pytest.fixture(scope="module")
def service(tmp_path_factory, dns_server):
    running = ServiceProcess(tmp_path_factory.mktemp("live"), dns_address=dns_server.address, extra=SIMULATED).start()
    yield running.base_url
    running.stop()


@pytest.fixture(scope="module")
def signed_in(service, axe_script):
    """A browser page signed in as the owner of a new workspace, whose first domain is checked already."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = chromium.new_context(bypass_csp=True).new_page()  # bypass: only for the injected axe-core
        signed_up_and_in(page, service, "newcomer@shop-owner.com", "first.example.com")
        yield page
        chromium.close()


def add_domain(page, service: str, apex: str) -> None:
    page.goto(service + "/domains")
    page.fill("#hostnames", apex)
    page.click("#add")
    page.wait_for_url("**/site/*/dns")


@pytest.fixture(scope="module")
def watched(signed_in, service):
    """What the page of a domain added in the portal showed, watched until its certificate was active."""
    add_domain(signed_in, service, "live.example.com")
    seen = {"at first": signed_in.inner_text("#ops-status")}
    signed_in.evaluate("window.notReloaded = true")
    signed_in.wait_for_selector("#validation-status:has-text('verified')", timeout=WAIT_MS)
    signed_in.wait_for_selector("#cert-status:has-text('active')", timeout=WAIT_MS)
    seen |= {"reloaded": signed_in.evaluate("window.notReloaded") is not True,
             "certificate": signed_in.inner_text("#cert-summary"), "polled": signed_in.locator("[data-poll]").count()}
    return seen


def test_a_new_domain_becomes_verified_and_active_on_its_page_without_a_reload(watched):
    assert watched["at first"] == "not checked yet"
    assert not watched["reloaded"] and "Sandbox CA" in watched["certificate"]


def test_polling_stops_once_nothing_waits(watched):
    assert watched["polled"] == 0


def test_the_page_passes_axe_once_active(watched, signed_in, axe_script):
    assert_accessible(signed_in, axe_script)


def test_once_active_without_a_reload_neither_the_message_nor_the_button_says_it_is_not_active(signed_in, service):
    """Issue 48, item 8: "Check now" left "...is issuing the certificate..." on the page, and the
    button "Why is it not active?", after the status beside them turned active by itself."""
    add_domain(signed_in, service, "checked.example.com")
    signed_in.click("#check-now")
    signed_in.wait_for_selector("main > p.flash")
    said = signed_in.inner_text("main > p.flash")
    signed_in.wait_for_selector("#cert-status:has-text('active')", timeout=WAIT_MS)
    assert "issuing" in said and signed_in.locator("main > p.flash").count() == 0
    assert signed_in.inner_text("#diagnose") == "Run a diagnosis"


def test_the_domains_list_shows_a_new_domain_active_without_a_reload(signed_in, service):
    add_domain(signed_in, service, "listed.example.com")
    signed_in.goto(service + "/domains")
    polled_at_first = signed_in.locator("#domain-rows[data-poll]").count()
    signed_in.evaluate("window.notReloaded = true")
    row = "#domain-rows tr:has(a:text-is('listed.example.com'))"
    signed_in.wait_for_selector(f"{row} td[data-label=Certificate]:text-is('active')", timeout=WAIT_MS)
    assert polled_at_first == 1 and signed_in.evaluate("window.notReloaded") is True
    assert signed_in.locator("[data-poll]").count() == 0


@pytest.mark.parametrize("width_name", WIDTHS.keys())
def test_the_page_before_the_first_check_fits_and_is_shown(signed_in, service, kept_screenshots, width_name):
    signed_in.set_viewport_size({"width": WIDTHS[width_name], "height": 900})
    add_domain(signed_in, service, f"shown-{width_name}.example.com")
    signed_in.screenshot(path=str(kept_screenshots / f"dns-simulated-{width_name}.png"), full_page=True)
    assert_fits(signed_in, WIDTHS[width_name])
