"""The documentation site's configuration reference in a real browser (Debian's Chromium): the site
built as tests/test_docs.py builds it and served over HTTP on loopback, read at a phone's width and
a desktop's. The tables fit both (on a phone each key is a card: docs/stylesheets/extra.css)
and axe-core finds nothing serious in the page's text. The screenshots docs/operating/configuration.md shows are taken
here (``configuration-<width name>.png``; kept with ``UPDATE_SCREENSHOTS=1``, conftest.py).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from tests.browser.test_portal_pages import WIDTHS, assert_fits

pytestmark = needs_chromium

ROOT = Path(__file__).resolve().parents[2]
#: What a screenshot shows: the reference from this section on, as far as the window reaches.
SHOWN_SECTION = "provider-acme"
HEIGHTS = {"phone": 844, "desktop": 1000}
#: The section's heading at the top of the window, below the theme's fixed header.
SCROLL_TO = """id => {
  const top = document.getElementById(id).getBoundingClientRect().top + window.scrollY;
  window.scrollTo(0, top - document.querySelector("header").offsetHeight - 8);
}"""


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Not a line per file on the test's output."""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> str:
    """The built site's address, served from a folder by Python's HTTP server."""
    folder = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
                           check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def page(site):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium.new_context(bypass_csp=True).new_page()  # bypass: only for the injected axe-core
        chromium.close()


def open_reference(page, site: str, width_name: str):
    page.set_viewport_size({"width": WIDTHS[width_name], "height": HEIGHTS[width_name]})
    page.goto(site + "/operating/configuration.html")
    page.wait_for_selector(f"#{SHOWN_SECTION}")
    return page


@pytest.mark.parametrize("width_name", WIDTHS.keys())
def test_the_configuration_reference_fits_the_width_and_is_shown(page, site, kept_screenshots, width_name):
    open_reference(page, site, width_name)
    page.evaluate(SCROLL_TO, SHOWN_SECTION)
    # The theme swaps the header's title as the page scrolls: the picture is taken once that is done.
    page.wait_for_function("document.getAnimations().every(a => a.playState !== 'running')")
    page.screenshot(path=str(kept_screenshots / f"configuration-{width_name}.png"))
    assert_fits(page, WIDTHS[width_name])
    sideways = page.evaluate("""[...document.querySelectorAll('.config-table .md-typeset__scrollwrap')]
        .filter(box => box.scrollWidth > box.clientWidth + 0.5).length""")
    assert sideways == 0


def test_on_a_phone_each_key_is_a_card_with_its_default_said(page, site):
    open_reference(page, site, "phone")
    row = page.locator(f"#{SHOWN_SECTION} ~ .config-table tr:has(code:text-is('directory_url'))").first
    assert row.evaluate("r => getComputedStyle(r).display") == "block"
    assert row.locator("td").nth(1).evaluate("c => getComputedStyle(c, '::before').content") == '"default "'


@pytest.mark.parametrize("width_name", WIDTHS.keys())
def test_the_configuration_reference_passes_axe(page, site, axe_script, width_name):
    """The page's text, ours: the theme's frame around it (its search dialog, its footer) is not."""
    open_reference(page, site, width_name).add_script_tag(path=str(axe_script))
    results = page.evaluate("axe.run(document.querySelector('article'), {resultTypes: ['violations']})")
    serious = [f"{v['id']}: {v['help']}; {[node['target'] for node in v['nodes']][:5]}"
               for v in results["violations"] if v["impact"] in ("serious", "critical")]
    assert serious == []
