"""Issue 48, item 3, in a real browser: the DNS page and the delete page of a service whose certificates
come from an ACME CA (``[provider] kind = "acme"``) name the CA and the service's own TLS terminator,
fit at 390 and 1,280 px, and pass axe-core with nothing serious; their screenshots are
``dns-acme-*.png`` and ``domain-delete-acme-*.png`` (docs/acme.md shows them).

The CA is a Pebble directory address nothing listens on: the pages read no CA, and nothing here
orders a certificate (the domain is not verified).
"""

from __future__ import annotations

import pytest

from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from tests.browser.steps import signed_up_and_in
from tests.browser.test_portal_pages import WIDTHS, assert_accessible, assert_fits
from tests.servers.service import ServiceProcess, free_port

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def service(tmp_path_factory, dns_server):
    extra = (f'[provider]\nkind = "acme"\n[provider.acme]\ndirectory_url = "https://127.0.0.1:{free_port()}/dir"\n'
             f'[delegation_dns]\nzone = "acme.saas.example"\nnameservers = ["ns1.saas.example"]\n'
             f'listen = "127.0.0.1:{free_port()}"\n')
    running = ServiceProcess(tmp_path_factory.mktemp("acme-pages"), dns_address=dns_server.address, extra=extra).start()
    yield running.base_url
    running.stop()


@pytest.fixture(scope="module")
def page(service):
    """A browser page signed in as the owner of a new workspace, on its first domain's DNS page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = chromium.new_context(bypass_csp=True).new_page()  # bypass: only for the injected axe-core
        signed_up_and_in(page, service, "owner@shop-owner.com", "shop.example.com")
        page.dns_url = page.url
        yield page
        chromium.close()


@pytest.mark.parametrize("width_name", WIDTHS.keys())
def test_the_dns_page_names_the_ca_fits_and_is_shown(page, kept_screenshots, width_name):
    page.set_viewport_size({"width": WIDTHS[width_name], "height": 900})
    page.goto(page.dns_url)
    page.screenshot(path=str(kept_screenshots / f"dns-acme-{width_name}.png"), full_page=True)
    assert_fits(page, WIDTHS[width_name])
    assert "lets Pebble validate the certificate" in page.inner_text("main")
    assert "edge provider" not in page.inner_text("main")


def test_the_dns_page_passes_axe(page, axe_script):
    page.goto(page.dns_url)
    assert_accessible(page, axe_script)


@pytest.mark.parametrize("width_name", WIDTHS.keys())
def test_the_delete_page_says_the_certificate_is_revoked_fits_and_is_shown(page, kept_screenshots, width_name):
    page.set_viewport_size({"width": WIDTHS[width_name], "height": 900})
    page.goto(page.dns_url.replace("/dns", "/delete"))
    page.screenshot(path=str(kept_screenshots / f"domain-delete-acme-{width_name}.png"), full_page=True)
    assert_fits(page, WIDTHS[width_name])
    assert "revoked at Pebble" in page.inner_text("#delete-certificate")


def test_the_delete_page_passes_axe(page, axe_script):
    page.goto(page.dns_url.replace("/dns", "/delete"))
    assert_accessible(page, axe_script)
