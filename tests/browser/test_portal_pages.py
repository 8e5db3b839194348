"""Every portal page in a real browser (Debian's Chromium through Playwright) at a phone's width
(390 px) and a desktop's (1280 px): nothing scrolls sideways (a table that scrolls in its own box
says so), and axe-core finds no serious or critical accessibility violation. Also the phone layout
of lists, and labels above their fields.

One service process serves the whole module, seeded through its API with what the pages show at
their fullest: an active domain with a sandbox certificate, a blocked one, a long hostname with
wrong records published (for the diagnosis), a verification link and a revoked one, API keys, a
second workspace (the switcher), a pending invitation, and a bulk add through the domains page (its
line-by-line answer). A page is one line of ``PAGES`` (signed in) or ``PUBLIC_PAGES`` (no account);
``{name}`` in a path is a seeded id.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import attrs
import pytest

from core.identity.scopes import SCOPES
from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from tests.servers.dns import DnsServer
from tests.servers.pkce import new_flow
from tests.servers.service import ServiceProcess, call, identity_provider_code

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = needs_chromium

OWNER = "owner@shop-owner.com"
LONG = "a-very-long-subdomain-name.for-the-overflow-check.customer-example.com"
WIDTHS = {"phone": 390, "desktop": 1280}
UNLIMITED = "\n".join(f"{bucket} = 1000000" for bucket in
                      ("api", "auth", "signup", "public_verification_links", "verification_links"))

PAGES = [
    ("domains", "/domains"),
    ("domains search", "/domains?q=overflow"),
    ("domains none match", "/domains?q=nothing-matches&status=blocked"),
    ("dns active", "/site/{active}/dns"),
    ("dns long hostname", "/site/{long}/dns"),
    ("dns diagnosis", "/site/{long}/dns?diagnose=1"),
    ("dns blocked", "/site/{blocked}/dns"),
    ("account", "/account"),
    ("keys", "/account/keys"),
    ("not found signed in", "/no-such-page"),
    ("webhooks", "/webhooks"),
    ("webhook", "/webhooks/{webhook}"),
    ("webhook delete", "/webhooks/{webhook}/delete"),
    ("team", "/team"),
    ("domain delete", "/site/{long}/delete"),
    ("dns scan", "/site/{active}/dns?scan=1"),
    ("dns not checked yet", "/site/{waiting}/dns"),
    ("domains added", "{added}"),
    ("key rotate", "/account/keys/{key}/rotate"),
    ("key revoke", "/account/keys/{key}/revoke"),
]
PUBLIC_PAGES = [
    ("home", "/"),
    ("signup", "/signup"),
    ("not found", "/no-such-page"),
    ("link page", "/verify/{link}"),
    ("link diagnosis", "/verify/{link}?diagnose=1"),
    ("revoked link", "/verify/{revoked_link}"),
    ("unknown link", "/verify/no-such-token"),
    ("sign-in failed", "/auth/callback?code=stale&state=stale"),
    ("identity provider", "/login"),
    ("sign-up answer gone", "/signup/done"),
]
#: The documentation's screenshots (docs/portal.md), at both widths: tests/browser/screenshots/<name>-<width name>.png.
SCREENSHOTS = [("domains", "domains"), ("dns active", "dns"), ("link page", "link-page"), ("keys", "keys"),
               ("webhooks", "webhooks"), ("team", "team"), ("domain delete", "domain-delete"),
               ("dns not checked yet", "dns-not-checked-yet"), ("domains added", "domains-added"),
               ("key rotate", "key-rotate")]
#: What the bulk add of the domains page is seeded with: added, already there, refused.
BULK = ["shop.customer-example.com", "www.customer-example.com", "shop.example.com", "localhost", "shop_2.customer-example.com"]

#: The elements sticking out on the right, to say what to fix when a page is too wide.
WIDEST = """() => {
  const out = e => e.getBoundingClientRect().right > window.innerWidth + 0.5;
  const all = [...document.querySelectorAll("body *")].filter(out);
  const roots = all.filter(e => !out(e.parentElement));
  return (roots.length ? roots : all).slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "")
    + (e.className ? "." + e.className : "") + " right=" + Math.round(e.getBoundingClientRect().right));
}"""


@attrs.define
class Portal:
    base_url: str
    ids: dict[str, str]
    signed_in: Page
    "The Playwright page of the signed-in owner."
    visitor: Page
    "The Playwright page of a visitor without an account."
    axe: Path

    def open(self, name: str, *, public: bool, width: int) -> Page:
        """The page ``name`` loaded at ``width``."""
        path = dict(PUBLIC_PAGES if public else PAGES)[name].format(**self.ids)
        page = self.visitor if public else self.signed_in
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(self.base_url + path)
        return page


def seed(service: ServiceProcess, dns: DnsServer) -> dict[str, str]:
    """The workspace the pages show, made through the API; the ids the paths need."""
    base = service.base_url

    def ok(method: str, path: str, body: object = None, token: str | None = None, expect: int = 200):
        status, answer = call(base, method, path, body, token=token)
        assert status == expect, (method, path, status, answer)
        return answer

    def session(email: str, domain: str) -> str:
        ok("POST", "/v1/public/signup", {"email": email, "domain": domain}, expect=201)
        flow = new_flow()
        code = identity_provider_code(base, flow, email)
        exchange = {"code": code, "codeVerifier": flow["verifier"], "nonce": flow["nonce"]}
        return ok("POST", "/v1/auth/oidc/exchange", exchange)["token"]

    def publish(domain_id: str, token: str, *, wrong: bool = False) -> None:
        cname = ok("GET", f"/v1/domains/{domain_id}/delegation-record", token=token)
        txt = cname["ownership"]
        dns.publish(cname["host"], "CNAME", "somewhere-else.example.net" if wrong else cname["value"])
        dns.publish(txt["host"], "TXT", "an-old-token-left-behind" if wrong else txt["value"])
        ok("POST", f"/v1/domains/{domain_id}/verify-delegation", token=token)

    owner = session(OWNER, "shop.example.com")
    domains = {d["apex"]: d["id"] for d in ok("POST", "/v1/domains/query", {}, token=owner)["items"]}
    for apex in ("blocked.example.com", LONG, "www.example.com", "staging.overflow-check.example.org"):
        domains[apex] = ok("POST", "/v1/domains", {"apex": apex, "tags": ["seeded"]}, token=owner, expect=201)["id"]
    publish(domains["shop.example.com"], owner)
    rechecked = ok("POST", f"/v1/domains/{domains['shop.example.com']}/recheck", token=owner)
    assert rechecked["certStatus"] == "active", rechecked  # the sandbox activates at once here
    publish(domains["blocked.example.com"], owner)
    publish(domains[LONG], owner, wrong=True)

    for_admin = {"domainId": domains[LONG], "recipientEmail": "dns-admin@customer-example.com"}
    link = ok("POST", "/v1/verification-links", for_admin, token=owner, expect=201)
    revoked = ok("POST", "/v1/verification-links", {"domainId": domains[LONG]}, token=owner, expect=201)
    ok("POST", f"/v1/verification-links/{revoked['id']}/revoke", token=owner, expect=204)

    key = ok("POST", "/v1/api-keys", {"name": "deploy pipeline of " + LONG, "scopes": list(SCOPES)}, token=owner,
             expect=201)
    spare = ok("POST", "/v1/api-keys", {"name": "old reader", "scopes": ["domains:read"]}, token=owner, expect=201)
    ok("POST", f"/v1/api-keys/{spare['id']}/revoke", token=owner, expect=204)

    # A second workspace the owner joined (the switcher), and a pending invitation (the account page).
    other = session("colleague@another-agency.example", "agency.example.com")
    invited = ok("POST", "/v1/team/invitations", {"email": OWNER, "role": "admin"}, token=other, expect=201)
    ok("POST", f"/v1/invitations/{invited['id']}/accept", token=owner)
    third = session("someone@third-workspace.example", "third.example.com")
    ok("POST", "/v1/team/invitations", {"email": OWNER, "role": "operator"}, token=third, expect=201)

    dns.publish("hooks.customer-example.com", "A", "93.184.216.34")
    endpoint = {"url": "https://hooks.customer-example.com/cps/events", "events": []}
    hook = ok("POST", "/v1/webhooks", endpoint, token=owner, expect=201)
    return {
        "active": domains["shop.example.com"], "blocked": domains["blocked.example.com"], "long": domains[LONG],
        "link": urlsplit(link["url"]).path.rsplit("/", 1)[1],
        "revoked_link": urlsplit(revoked["url"]).path.rsplit("/", 1)[1],
        "webhook": hook["id"], "waiting": domains["www.example.com"], "key": key["id"],
    }


@pytest.fixture(scope="module")
def portal(tmp_path_factory, axe_script) -> Iterator[Portal]:
    from playwright.sync_api import sync_playwright

    dns = DnsServer().start()
    service = ServiceProcess(tmp_path_factory.mktemp("portal-pages"), dns_address=dns.address,
                             extra=f"[provider.sandbox]\nactivation_delay_seconds = 0\n[rate_limits]\n{UNLIMITED}\n").start()
    try:
        ids = seed(service, dns)
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            signed_in = chromium.new_context(bypass_csp=True).new_page()  # the CSP would refuse the injected axe-core
            signed_in.goto(service.base_url + "/login")
            signed_in.fill("input[name=email]", OWNER)
            signed_in.click("button:has-text('Sign in')")
            signed_in.wait_for_url("**/domains")
            signed_in.fill("#hostnames", "\n".join(BULK))
            signed_in.click("#add")
            signed_in.wait_for_url("**/domains/added/*")
            ids["added"] = urlsplit(signed_in.url).path
            visitor = chromium.new_context(bypass_csp=True).new_page()
            yield Portal(service.base_url, ids, signed_in, visitor, axe_script)
            chromium.close()
    finally:
        service.stop()
        dns.stop()


#: Table boxes that scroll sideways without the line above them saying so.
UNSAID_SCROLLERS = """() => [...document.querySelectorAll("div.table-scroll")]
  .filter(box => box.scrollWidth > box.clientWidth)
  .filter(box => !(box.previousElementSibling && box.previousElementSibling.matches("p.scroll-hint")))
  .map(box => (box.querySelector("table") || box).id || box.outerHTML.slice(0, 80))"""


def assert_fits(page: Page, width: int) -> None:
    """Nothing sticks out of the page, and a table box that scrolls sideways says so above it."""
    scroll_width, inner_width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert inner_width == width
    assert scroll_width <= inner_width, (
        f"{page.url} is {scroll_width} px wide at {width} px; sticking out: {page.evaluate(WIDEST)}")
    assert page.evaluate(UNSAID_SCROLLERS) == [], f"{page.url}: tables scrolling sideways unsaid at {width} px"


def assert_accessible(page: Page, axe: Path) -> None:
    page.add_script_tag(path=str(axe))
    # Every rule runs; only the violations are gathered node by node (the passes took a fifth of the CPU).
    results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    serious = [v for v in results["violations"] if v["impact"] in ("serious", "critical")]
    assert not serious, f"axe-core on {page.url}:\n" + "\n".join(
        f"  {v['id']} ({v['impact']}): {v['help']}; {[node['target'] for node in v['nodes']]}" for v in serious)


PAGE_NAMES = [name for name, _ in PAGES]
PUBLIC_NAMES = [name for name, _ in PUBLIC_PAGES]


class TestNothingScrollsSideways:
    @pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
    @pytest.mark.parametrize("name", PAGE_NAMES)
    def test_a_signed_in_page_fits_the_width(self, portal, name, width):
        assert_fits(portal.open(name, public=False, width=width), width)

    @pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
    @pytest.mark.parametrize("name", PUBLIC_NAMES)
    def test_a_public_page_fits_the_width(self, portal, name, width):
        assert_fits(portal.open(name, public=True, width=width), width)


class TestAxeFindsNothingSerious:
    @pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
    @pytest.mark.parametrize("name", PAGE_NAMES)
    def test_a_signed_in_page_passes_axe(self, portal, name, width):
        assert_accessible(portal.open(name, public=False, width=width), portal.axe)

    @pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
    @pytest.mark.parametrize("name", PUBLIC_NAMES)
    def test_a_public_page_passes_axe(self, portal, name, width):
        assert_accessible(portal.open(name, public=True, width=width), portal.axe)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_signed_up_page_fits_and_passes_axe(portal, width):
    """The answer to the home page's form, reachable only by posting it."""
    page = portal.open("home", public=True, width=width)
    page.fill("input[name=email]", f"new-{width}@{LONG}")
    page.fill("input[name=domain]", f"shop-{width}.{LONG}")
    page.click("button:has-text('Sign up')")
    page.wait_for_selector("h1:has-text('Welcome')")
    assert_fits(page, width)
    assert_accessible(page, portal.axe)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_answer_to_signing_up_again_fits_and_passes_axe(portal, width):
    """An e-mail with an account already: nothing signed up, the hostname kept for after sign-in."""
    page = portal.open("home", public=True, width=width)
    page.fill("input[name=email]", OWNER)
    page.fill("input[name=domain]", f"another-{width}.{LONG}")
    page.click("button:has-text('Sign up')")
    page.wait_for_selector("h1:has-text('You already have an account')")
    assert_fits(page, width)
    assert_accessible(page, portal.axe)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_refused_form_fits_and_passes_axe(portal, width):
    """The domains page after a refused hostname (post/redirect/get): the reason and what was typed."""
    page = portal.open("domains", public=False, width=width)
    page.fill("#hostnames", "shop.example.com:8443")
    page.click("#add")
    page.wait_for_selector("#add-error")
    assert page.url.endswith("/domains") and page.input_value("#hostnames") == "shop.example.com:8443"
    assert_fits(page, width)
    assert_accessible(page, portal.axe)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_sign_in_without_a_workspace_fits_and_passes_axe(portal, width):
    """Signed in at the identity provider as someone with no workspace here: sign-up and another account offered."""
    page = portal.open("identity provider", public=True, width=width)
    page.fill("input[name=email]", f"stranger-{width}@{LONG}")
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("#another-account")
    assert_fits(page, width)
    assert_accessible(page, portal.axe)


class TestPhoneLayout:
    """At 390 px, lists of things are one block per row: no column is hidden in a box scrolling sideways."""

    IN_VIEW = """selector => [...document.querySelectorAll(selector)].map(e => e.getBoundingClientRect())
      .every(box => box.width > 0 && box.right <= window.innerWidth)"""

    def test_every_members_change_role_and_remove_are_in_view(self, portal):
        page = portal.open("team", public=False, width=WIDTHS["phone"])
        assert page.evaluate(self.IN_VIEW, "#members select, #members td[data-label=Remove] a")
        assert page.locator("#members td[data-label=Remove] a").count() > 0

    def test_every_domains_date_added_is_in_view(self, portal):
        page = portal.open("domains", public=False, width=WIDTHS["phone"])
        assert page.evaluate(self.IN_VIEW, "#domains td[data-label=Added] time")
        added = "getComputedStyle(document.querySelector('#domains td[data-label=Added]'), '::before').content"
        assert page.evaluate(added) != "none"  # each value follows its column's name


class TestFormFields:
    #: Labels whose text is not above their field: the field starts right of the label's left edge.
    BESIDE = """() => [...document.querySelectorAll("main label")].flatMap(label => {
      const field = label.querySelector("input:not([type=checkbox]):not([type=radio]):not([type=hidden]), select, textarea");
      return field && field.getBoundingClientRect().left > label.getBoundingClientRect().left + 1 ? [label.textContent.trim()] : [];
    })"""

    @pytest.mark.parametrize("name", ["domains", "dns not checked yet", "keys", "webhooks", "webhook", "team"])
    def test_every_label_is_above_its_field(self, portal, name):
        page = portal.open(name, public=False, width=WIDTHS["desktop"])
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert page.evaluate(self.BESIDE) == []

    def test_the_webhook_url_field_has_room_for_a_url(self, portal):
        page = portal.open("webhooks", public=False, width=WIDTHS["desktop"])
        assert page.locator("input[name=url]").bounding_box()["width"] >= 600


def test_a_forms_buttons_are_disabled_once_it_is_sending_and_the_clicked_one_still_counts(portal):
    """portal.js disables them after the submission has started: a disabled submitter would drop its
    name and value. The request is held for a second; the page notes the buttons' state meanwhile."""
    page = portal.open("domains", public=False, width=1280)
    page.evaluate("""() => {
      const form = document.querySelector("form.filters");
      form.insertAdjacentHTML("beforeend", '<button type="submit" name="choice" value="second" id="second">Second</button>');
      form.addEventListener("submit", () => setTimeout(() => sessionStorage.setItem("disabled",
          [...form.querySelectorAll("button")].map(b => b.disabled).join()), 300));
    }""")
    sent: list[str] = []

    def hold(route) -> None:
        sent.append(route.request.url)
        time.sleep(1)
        route.continue_()

    page.route("**/domains?**", hold)
    try:
        page.click("#second")
        page.wait_for_url("**/domains?**")
    finally:
        page.unroute("**/domains?**")
    assert "choice=second" in sent[0]
    assert page.evaluate("sessionStorage.getItem('disabled')") == "true,true"


@pytest.mark.parametrize("width_name", WIDTHS.keys())
@pytest.mark.parametrize(("name", "file_name"), SCREENSHOTS)
def test_readme_screenshot(portal, kept_screenshots, name, file_name, width_name):
    page = portal.open(name, public=name in PUBLIC_NAMES, width=WIDTHS[width_name])
    page.screenshot(path=str(kept_screenshots / f"{file_name}-{width_name}.png"), full_page=True)
