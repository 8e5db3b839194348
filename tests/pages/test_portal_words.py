"""Words a customer understands: statuses in words, a diagnosis that says when all is well, a 429
page that says when to try again, the sign-up form at /signup, a 404 page that knows who is
signed in, a favicon, and the workspace switcher in the header."""

from __future__ import annotations

import re

import attrs
import pytest

from core.config import RateLimitsConfig
from tests.helpers import active_domain
from tests.pages.portal_client import new_domain, sign_in


class TestStatuses:
    @pytest.mark.gen_test
    async def test_the_domain_list_says_needs_action_not_the_raw_value(self, browser, services, world, api, dns):
        owner = world.owner()
        d = await new_domain(api, owner)
        await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)  # nothing published
        sign_in(browser, services, owner)
        page = (await browser.get("/domains")).body.decode()
        assert ">needs action</span>" in page and ">action_needed<" not in page

    @pytest.mark.gen_test
    async def test_a_domain_without_a_certificate_says_so_in_words(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        assert re.search(r'id="cert-status">no certificate yet<', page)

    @pytest.mark.gen_test
    async def test_the_filter_options_keep_the_raw_values_and_show_words(self, browser, services, world):
        sign_in(browser, services, world.owner())
        page = (await browser.get("/domains")).body.decode()
        assert '<option value="action_needed" >needs action</option>' in page


class TestDiagnosisHeadline:
    @pytest.mark.gen_test
    async def test_an_active_domain_offers_a_diagnosis_not_why_it_is_not_active(self, browser, services, world, api, clock, dns):
        owner, certificate = await active_domain(api, world, services, clock)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{certificate['domainId']}/dns")).body.decode()
        assert "Run a diagnosis" in page and "Why is it not active" not in page

    @pytest.mark.gen_test
    async def test_a_healthy_diagnosis_opens_by_saying_all_is_well(self, browser, services, world, api, clock, dns):
        owner, cert = await active_domain(api, world, services, clock)
        d = (await api.get(f"/v1/domains/{cert['domainId']}", token=owner.token)).body
        dns.publish("_acme-challenge.shop.example.com", "CNAME", d["validation"]["delegation"]["value"])
        dns.publish("_service-verify.shop.example.com", "TXT", d["validation"]["ownership"]["value"])
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns?diagnose=1")).body.decode()
        verdict = re.search(r'<p class="verdict (\w+)" id="verdict">(.*?)</p>', page, re.DOTALL)
        assert verdict.group(1) == "ok" and verdict.group(2).startswith("<strong>All is well.</strong>")

    @pytest.mark.gen_test
    async def test_before_the_first_check_a_healthy_diagnosis_says_the_check_is_still_to_come(
            self, browser, services, world, api, dns):
        owner = world.owner()
        d = await new_domain(api, owner)
        dns.publish("_acme-challenge.shop.example.com", "CNAME", d["validation"]["delegation"]["value"])
        dns.publish("_service-verify.shop.example.com", "TXT", d["validation"]["ownership"]["value"])
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns?diagnose=1")).body.decode()
        verdict = re.sub(r"\s+", " ", re.search(r'id="verdict">(.*?)</p>', page, re.DOTALL).group(1))
        assert "All is well" not in page and "nothing needs fixing" not in page
        assert verdict.startswith("<strong>Both records are published as they should be.</strong> The domain is not "
                                  "checked yet: the check at 2026-11-22 10:01:")

    @pytest.mark.gen_test
    async def test_findings_are_labelled_in_words(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns?diagnose=1")).body.decode()
        assert '<span class="badge error">problem</span>' in page


class TestTooManyRequests:
    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, rate_limits=RateLimitsConfig(api=1))

    @pytest.mark.gen_test
    async def test_the_429_page_says_when_to_try_again(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        await browser.post("/domains", {"hostnames": "one.example.com"})
        r = await browser.post("/domains", {"hostnames": "two.example.com"})
        wait = int(r.headers["Retry-After"])
        assert r.code == 429 and f"Try again in {wait} second" in r.body.decode()


class TestPlainPages:
    @pytest.mark.gen_test
    async def test_signup_typed_in_the_address_bar_shows_the_form(self, browser):
        r = await browser.get("/signup")
        assert r.code == 200 and 'action="/signup"' in r.body.decode()

    @pytest.mark.gen_test
    async def test_the_404_page_offers_a_signed_in_person_their_domains(self, browser, services, world):
        sign_in(browser, services, world.owner())
        page = (await browser.get("/no/such/page")).body.decode()
        assert 'href="/domains">Back to your domains' in page and ">Sign in<" not in page

    @pytest.mark.gen_test
    async def test_the_404_page_offers_a_stranger_the_start_page(self, browser):
        page = (await browser.get("/no/such/page")).body.decode()
        assert 'href="/">Back to the start page' in page

    @pytest.mark.gen_test
    async def test_there_is_a_favicon(self, browser):
        r = await browser.get("/favicon.ico")
        assert r.code == 200 and r.body[:4] == b"\x00\x00\x01\x00"


class TestWorkspaceSwitcher:
    @pytest.mark.gen_test
    async def test_a_person_in_one_workspace_sees_no_switcher(self, browser, services, world):
        sign_in(browser, services, world.owner())
        assert 'id="workspace-switcher"' not in (await browser.get("/domains")).body.decode()

    @pytest.mark.gen_test
    async def test_a_person_in_two_workspaces_switches_from_the_header(self, browser, services, world, api):
        mine, theirs = world.owner(name="Mine"), world.owner(name="Theirs")
        member = world.member(theirs.workspace, "admin", email=mine.user.email)
        await new_domain(api, theirs, "theirs.example.com")
        sign_in(browser, services, member)
        page = (await browser.get("/domains")).body.decode()
        assert 'id="workspace-switcher"' in page
        r = await browser.submit("/domains", "/account/switch", {"workspace": str(theirs.workspace.id)})
        assert r.headers["Location"] == "/domains"
        assert "theirs.example.com" in (await browser.get("/domains")).body.decode()

    @pytest.mark.gen_test
    async def test_switching_to_a_workspace_one_is_not_in_changes_nothing(self, browser, services, world):
        mine, stranger = world.owner(name="Mine"), world.owner(name="Stranger")
        sign_in(browser, services, mine)
        await browser.post("/account/switch", {"workspace": str(stranger.workspace.id), "next": "/domains"})
        page = (await browser.get("/account")).body.decode()
        assert "Workspace not found." in page and "Showing workspace <strong>Mine</strong>" in page

    @pytest.mark.gen_test
    async def test_switching_never_leads_off_the_site(self, browser, services, world):
        sign_in(browser, services, world.owner())
        r = await browser.post("/account/switch", {"workspace": "x", "next": "//evil.example/"})
        assert r.headers["Location"] == "/domains"
