"""The portal pages over HTTP, as a browser without JavaScript uses them (cookies kept, forms
posted with their XSRF token). The headless-browser walk lives in tests/browser/."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import attrs
import pytest
from tornado.web import decode_signed_value

from core.config import ServerConfig
from core.identity import team
from core.identity.auth import Principal
from handlers.portal.pages import in_button_words
from tests.helpers import OTHER_SPELLINGS, active_domain, mark_verified
from tests.pages.portal_client import Browser, new_domain, sign_in
from tests.servers.dns import DnsServer


class TestHome:
    """The root page and the sign-up form."""

    @pytest.mark.gen_test
    async def test_the_home_page_offers_sign_up_sign_in_and_the_api_document(self, browser):
        r = await browser.get("/")
        page = r.body.decode()
        assert r.code == 200 and 'action="/signup"' in page and 'href="/login"' in page and "/v1/openapi.json" in page
        assert 'name="_xsrf"' in page

    @pytest.mark.gen_test
    async def test_sign_up_creates_the_account_and_leads_to_the_dns_page_after_sign_in(self, browser, services):
        r = await browser.follow(await browser.post("/signup", {"email": "new@example.com", "domain": "shop.example.com"}))
        assert r.code == 200 and b"Welcome, new@example.com" in r.body
        login = re.search(r'href="(/login\?[^"]+)"', r.body.decode()).group(1).replace("&amp;", "&")
        params = parse_qs(urlsplit(login).query)
        assert re.fullmatch(r"/site/[0-9a-f-]{36}/dns", params["next"][0]) and params["login_hint"] == ["new@example.com"]

    @pytest.mark.gen_test
    async def test_the_sign_up_answer_is_a_redirect_so_a_reload_signs_up_no_one_again(self, browser):
        r = await browser.post("/signup", {"email": "new@example.com", "domain": "shop.example.com"})
        assert (r.code, r.headers["Location"]) == (303, "/signup/done")

    @pytest.mark.gen_test
    async def test_the_answer_page_without_a_sign_up_offers_sign_in_and_sign_up(self, browser):
        r = await browser.get("/signup/done")
        page = r.body.decode()
        assert r.code == 200 and 'id="signed-up-gone"' in page and 'href="/login"' in page and 'href="/signup"' in page

    @pytest.mark.gen_test
    async def test_a_bad_hostname_is_shown_on_the_form(self, browser):
        r = await browser.post("/signup", {"email": "new@example.com", "domain": "localhost"})
        assert (r.code, r.headers["Location"]) == (303, "/signup")
        page = (await browser.follow(r)).body
        assert b'role="alert"' in page and b'value="new@example.com"' in page and b'value="localhost"' in page

    @pytest.mark.gen_test
    async def test_a_form_without_the_xsrf_token_is_refused(self, browser):
        await browser.get("/")
        r = await browser.request("POST", "/signup", {"email": "x@example.com", "domain": "x.example.com", "_xsrf": "forged"})
        assert r.code == 403


class TestSignIn:
    """/login, /auth/callback and signing out."""

    @pytest.mark.gen_test
    async def test_a_signed_out_visitor_is_sent_to_sign_in_and_back(self, browser, api, world):
        d = await new_domain(api, world.owner())
        r = await browser.get(f"/site/{d['id']}/dns")
        assert r.code == 302
        assert r.headers["Location"] == "/login?" + urlencode({"next": f"/site/{d['id']}/dns"})

    @pytest.mark.gen_test
    async def test_a_callback_is_single_use(self, browser, services):
        r = await browser.get("/login")
        state = parse_qs(urlsplit(r.headers["Location"]).query)["state"][0]
        cookie = dict(browser.cookies)
        first = await browser.follow(await browser.get(f"/auth/callback?code=x&state={state}"))
        assert b"already used" not in first.body  # the code is refused by the provider, the state is used up
        browser.cookies = cookie  # replay the very cookie that started it
        again = await browser.follow(await browser.get(f"/auth/callback?code=x&state={state}"))
        assert again.code == 400 and b"already used" in again.body

    @pytest.mark.gen_test
    async def test_a_flood_of_sign_in_starts_keeps_nothing_on_the_server(self, browser, services):
        r = await browser.get("/login")
        state = parse_qs(urlsplit(r.headers["Location"]).query)["state"][0]
        cookie = dict(browser.cookies)
        flood = Browser(browser.client, browser.base)
        for _ in range(50):
            await flood.get("/login")
        browser.cookies = cookie
        answer = await browser.follow(await browser.get(f"/auth/callback?code=x&state={state}"))
        assert answer.code != 200 and b"stale" not in answer.body  # the first sign-in was not pushed out

    @pytest.mark.gen_test
    async def test_a_failed_sign_in_leaves_no_spent_code_in_the_address(self, browser, services):
        """Issue 48: the page saying why was the callback's own, ``?code=...&state=...`` kept in the
        address bar (to be copied, bookmarked, reloaded); it is a page of its own now."""
        failed = await browser.get("/auth/callback?code=spent-code&state=spent-state")
        assert (failed.code, failed.headers["Location"]) == (303, "/signin/failed")
        shown = await browser.follow(failed)
        assert shown.code == 400 and b"<title>Sign-in failed</title>" in shown.body and b"spent-code" not in shown.body

    @pytest.mark.gen_test
    async def test_the_failed_sign_in_page_says_why_again_on_a_reload(self, browser, services):
        failed = await browser.get("/auth/callback?code=x&state=not-started-here")
        first = await browser.follow(failed)
        again = await browser.get("/signin/failed")
        assert first.code == again.code == 400 and b"not started here" in again.body

    @pytest.mark.gen_test
    async def test_next_never_leaves_the_site(self, browser, services):
        from core.identity import portal_signin

        for target in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
            await browser.get("/login?" + urlencode({"next": target}))
            sealed = decode_signed_value(services.keyring.subkey("cookie").hex(), "cps_signin",
                                         browser.cookies["cps_signin"].strip('"')).decode()
            assert portal_signin.unseal(services.keyring, sealed).next_path == "/domains"

    @pytest.mark.gen_test
    async def test_sign_out_ends_the_session(self, browser, services, world):
        sign_in(browser, services, world.owner())
        assert (await browser.get("/account")).code == 200
        await browser.post("/logout")
        assert (await browser.get("/account")).code == 302

    @pytest.mark.gen_test
    async def test_the_account_page_shows_the_token_to_copy(self, browser, services, world):
        owner = world.owner()
        sign_in(browser, services, owner)
        page = (await browser.get("/account")).body.decode()
        assert owner.token in page and "owner" in page


class TestWorkspacesAndInvitations:
    """The account page: invitations to answer, workspaces to show or leave."""

    @pytest.fixture
    def invited(self, world, services):
        """Someone invited to a workspace who belongs to none yet, signed in."""
        owner = world.owner(name="Acme Corp")
        invitation = team.invite(services, principal=Principal(workspace=owner.workspace, user=owner.user, role="owner"),
                                 request=team.Invite(email="guest@example.com", role="admin"))
        return owner, invitation, attrs.evolve(owner, token=world.session_token("guest@example.com"))

    @pytest.mark.gen_test
    async def test_someone_only_invited_is_led_to_their_invitations(self, browser, services, invited):
        _, _, guest = invited
        sign_in(browser, services, guest)
        r = await browser.get("/domains")
        assert (r.code, r.headers["Location"].split("?")[0]) == (302, "/account")
        page = (await browser.get("/account")).body.decode()
        assert "Acme Corp" in page and "invites you as" in page and "no workspace yet" in page

    @pytest.mark.gen_test
    async def test_accepting_on_the_account_page_joins_and_shows_the_workspace(self, browser, services, invited):
        _, invitation, guest = invited
        sign_in(browser, services, guest)
        r = await browser.submit("/account", f"/account/accept/{invitation.id}")
        assert (r.code, r.headers["Location"]) == (303, "/account")
        page = (await browser.get("/account")).body.decode()
        assert "You joined Acme Corp as admin." in page and "Showing workspace <strong>Acme Corp</strong>" in page
        assert (await browser.get("/domains")).code == 200

    @pytest.mark.gen_test
    async def test_declining_on_the_account_page_leaves_nothing(self, browser, services, invited):
        owner, invitation, guest = invited
        sign_in(browser, services, guest)
        await browser.submit("/account", f"/account/decline/{invitation.id}")
        page = (await browser.get("/account")).body.decode()
        assert "Invitation declined." in page and "invites you as" not in page
        assert services.store.team.invitations(owner.workspace.id) == []

    @pytest.mark.gen_test
    async def test_switching_shows_the_other_workspaces_domains(self, browser, services, world, api):
        mine = world.owner("both@example.com", name="Mine")
        theirs = world.owner(name="Theirs")
        world.member(theirs.workspace, "operator", "both@example.com")
        await new_domain(api, theirs, "theirs.example.com")
        sign_in(browser, services, mine)
        assert "theirs.example.com" not in (await browser.get("/domains")).body.decode()
        await browser.post(f"/account/switch/{theirs.workspace.id}")
        assert "theirs.example.com" in (await browser.get("/domains")).body.decode()

    @pytest.mark.gen_test
    async def test_a_dns_page_of_another_of_ones_workspaces_opens_and_switches(self, browser, services, world, api):
        mine = world.owner("both@example.com", name="Mine")
        theirs = world.owner(name="Theirs")
        world.member(theirs.workspace, "operator", "both@example.com")
        domain = await new_domain(api, theirs, "theirs.example.com")
        sign_in(browser, services, mine)
        assert (await browser.get(f"/site/{domain['id']}/dns")).code == 200
        assert "theirs.example.com" in (await browser.get("/domains")).body.decode()

    @pytest.mark.gen_test
    async def test_switching_to_a_workspace_one_is_not_in_does_nothing(self, browser, services, world):
        mine, stranger = world.owner(name="Mine"), world.owner(name="Stranger")
        sign_in(browser, services, mine)
        await browser.post(f"/account/switch/{stranger.workspace.id}")
        page = (await browser.get("/account")).body.decode()
        assert "Workspace not found." in page and "Showing workspace <strong>Mine</strong>" in page

    @pytest.mark.gen_test
    @pytest.mark.parametrize("spell", OTHER_SPELLINGS.values(), ids=OTHER_SPELLINGS.keys())
    async def test_an_invitation_in_another_spelling_is_a_not_found_page(self, browser, services, invited, spell):
        """Issue 45, item 3: the account page's buttons take ids as the API does."""
        owner, invitation, guest = invited
        sign_in(browser, services, guest)
        form = await browser.form_on("/account", f"/account/accept/{invitation.id}")
        assert (await browser.post(f"/account/accept/{quote(spell(str(invitation.id)), safe='')}", form)).code == 404
        assert len(services.store.team.invitations(owner.workspace.id)) == 1

    @pytest.mark.gen_test
    @pytest.mark.parametrize("spell", OTHER_SPELLINGS.values(), ids=OTHER_SPELLINGS.keys())
    async def test_the_switcher_does_not_take_a_workspace_in_another_spelling(self, browser, services, world, spell):
        """Issue 45, item 3: the header's form names a workspace as X-Workspace-Id does."""
        mine = world.owner("both@example.com", name="Mine")
        theirs = world.owner(name="Theirs")
        world.member(theirs.workspace, "operator", "both@example.com")
        sign_in(browser, services, mine)
        await browser.post("/account/switch", {"workspace": spell(str(theirs.workspace.id)), "next": "/account"})
        page = (await browser.get("/account")).body.decode()
        assert "Workspace not found." in page and "Showing workspace <strong>Mine</strong>" in page

    @pytest.mark.gen_test
    async def test_leaving_on_the_account_page(self, browser, services, world):
        owner = world.owner(name="Acme")
        member = world.member(owner.workspace, "admin")
        sign_in(browser, services, member)
        await browser.submit("/account", f"/account/leave/{owner.workspace.id}")
        page = (await browser.get("/account")).body.decode()
        assert "You left the workspace." in page and "no workspace yet" in page


class TestCookies:
    """Cookie attributes."""

    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, server=attrs.evolve(ServerConfig(), portal_url="https://portal.example.com"))

    @pytest.mark.gen_test
    async def test_the_sign_in_cookie_is_secure_httponly_and_samesite_when_the_portal_is_https(self, browser):
        r = await browser.get("/login")
        cookie = next(c for c in r.headers.get_list("Set-Cookie") if c.startswith("cps_signin="))
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie

    @pytest.mark.gen_test
    async def test_the_xsrf_cookie_is_secure_httponly_and_samesite_when_the_portal_is_https(self, browser):
        r = await browser.get("/")
        cookie = next(c for c in r.headers.get_list("Set-Cookie") if c.startswith("_xsrf="))
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie


class TestCookiesOverHttp:
    """A portal on plain http (development): a Secure cookie would never come back."""

    @pytest.mark.gen_test
    async def test_the_xsrf_cookie_is_not_secure_when_the_portal_is_http(self, browser):
        r = await browser.get("/")
        cookie = next(c for c in r.headers.get_list("Set-Cookie") if c.startswith("_xsrf="))
        assert "Secure" not in cookie and "HttpOnly" in cookie


class TestDomainsPage:
    """/domains: list, search, add."""

    @pytest.mark.gen_test
    async def test_lists_the_workspaces_domains_only(self, browser, services, world, api):
        owner = world.owner()
        await new_domain(api, owner, "mine.example.com")
        await new_domain(api, world.owner(), "theirs.example.com")
        sign_in(browser, services, owner)
        page = (await browser.get("/domains")).body.decode()
        assert "mine.example.com" in page and "theirs.example.com" not in page

    @pytest.mark.gen_test
    async def test_search_filters(self, browser, services, world, api):
        owner = world.owner()
        await new_domain(api, owner, "alpha.example.com")
        await new_domain(api, owner, "beta.example.com")
        sign_in(browser, services, owner)
        page = (await browser.get("/domains?q=alpha")).body.decode()
        assert "alpha.example.com" in page and "beta.example.com" not in page

    @pytest.mark.gen_test
    async def test_adding_a_domain_shows_its_dns_page(self, browser, services, world):
        sign_in(browser, services, world.owner())
        r = await browser.submit("/domains", "/domains", {"hostnames": "new.example.com"})
        assert r.code == 303 and re.fullmatch(r"/site/[0-9a-f-]{36}/dns", r.headers["Location"])

    @pytest.mark.gen_test
    async def test_read_only_may_not_add(self, browser, services, world):
        owner = world.owner()
        sign_in(browser, services, world.member(owner.workspace, "read_only"))
        assert b'method="post" action="/domains"' not in (await browser.get("/domains")).body
        assert (await browser.post("/domains", {"hostnames": "new.example.com"})).code == 403


class TestDnsPage:
    """/site/<id>/dns: both records, statuses, Check now."""

    @pytest.mark.gen_test
    async def test_shows_both_records_in_full_and_relative_to_the_zone(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        for record in (d["validation"]["delegation"], d["validation"]["ownership"]):
            assert record["host"] in page and record["value"] in page
        assert "_acme-challenge<wbr>.shop</code>" in page and "_service-verify<wbr>.shop</code>" in page
        assert "example.com" in page and 'class="copy"' in page

    @pytest.mark.gen_test
    async def test_check_now_verifies_and_starts_issuance(self, browser, services, world, api, dns):
        owner = world.owner()
        d = await new_domain(api, owner)
        dns.publish("_acme-challenge.shop.example.com", "CNAME", d["validation"]["delegation"]["value"])
        dns.publish("_service-verify.shop.example.com", "TXT", d["validation"]["ownership"]["value"])
        sign_in(browser, services, owner)
        r = await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/dns/check")
        assert (r.code, r.headers["Location"]) == (303, f"/site/{d['id']}/dns")
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        assert "Both DNS records are in place" in page  # the check's message, shown once
        assert '<strong id="validation-status">verified</strong>' in page
        assert '<strong id="cert-status">pending</strong>' in page

    @pytest.mark.gen_test
    async def test_a_failed_check_explains_what_dns_answered(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/dns/check")
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        assert "NXDOMAIN" in page and 'id="dns-diagnosis"' in page

    @pytest.mark.gen_test
    async def test_read_only_sees_but_may_not_check(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, world.member(owner.workspace, "read_only"))
        page = await browser.get(f"/site/{d['id']}/dns")
        assert page.code == 200 and b"check-now" not in page.body
        assert (await browser.post(f"/site/{d['id']}/dns/check")).code == 403

    @pytest.mark.gen_test
    async def test_another_workspaces_domain_is_not_found(self, browser, services, world, api):
        d = await new_domain(api, world.owner())
        sign_in(browser, services, world.owner())
        assert (await browser.get(f"/site/{d['id']}/dns")).code == 404
        assert (await browser.get("/site/not-a-uuid/dns")).code == 404

    @pytest.mark.gen_test
    @pytest.mark.parametrize("spell", OTHER_SPELLINGS.values(), ids=OTHER_SPELLINGS.keys())
    async def test_ones_own_domain_in_another_spelling_is_a_not_found_page(self, browser, services, world, api, spell):
        """Issue 45, item 3: an id is read in the one form the API's patterns state, as in the API."""
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        site = f"/site/{quote(spell(d['id']), safe='')}"
        for page in ("/dns", "/edit", "/status", "/delete"):
            assert (await browser.get(site + page)).code == 404, page
        form = await browser.form_on(f"/site/{d['id']}/delete", f"/site/{d['id']}/delete")
        assert (await browser.post(site + "/delete", form)).code == 404
        assert (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).status == 200

    @pytest.mark.gen_test
    async def test_an_id_that_is_not_utf8_is_a_not_found_page_like_any_malformed_id(self, browser, services, world):
        sign_in(browser, services, world.owner())
        for path in ("/site/%FF/dns", "/site/%C3%28/dns"):
            r = await browser.get(path)
            assert r.code == 404 and r.headers["Content-Type"].startswith("text/html") and b"404" in r.body, path

    @pytest.mark.gen_test
    async def test_diagnose_shows_the_findings_and_their_fixes(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns?diagnose=1")).body.decode()
        assert 'id="diagnosis"' in page and "Something needs fixing." in page
        assert "No CNAME record is published at _acme-challenge.shop.example.com." in page
        assert f"<strong>Fix:</strong> Publish a CNAME record named _acme-challenge.shop.example.com with the value {d['validation']['delegation']['value']}." in page

    @pytest.mark.gen_test
    async def test_read_only_is_not_offered_the_diagnosis(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, world.member(owner.workspace, "read_only"))
        page = (await browser.get(f"/site/{d['id']}/dns?diagnose=1")).body.decode()
        assert 'id="diagnose"' not in page and 'id="diagnosis"' not in page


class TestDiagnosisInPlainWords:
    """The DNS page and the page a verification link opens render the diagnosis the API answers:
    each finding's sentence and its fix, and the edge provider's view. The zone ``example.com`` is
    served by a real DNS server on 127.0.0.2, found through NS records at the resolver."""

    CNAME_AT, TXT_AT = "_acme-challenge.shop.example.com", "_service-verify.shop.example.com"

    @pytest.fixture
    def config(self, config):
        """The zone's nameserver is on 127.0.0.2, which the diagnosis dials only because this allows it."""
        return attrs.evolve(config, network=attrs.evolve(config.network, allow_private_ranges=["127.0.0.2/32"]))

    @pytest.fixture(scope="class")
    def authoritative(self):
        server = DnsServer("127.0.0.2").start()
        yield server
        server.stop()

    @pytest.fixture
    def zone(self, authoritative, dns, services):
        dns.publish("example.com", "NS", "ns1.example.com")
        dns.publish("ns1.example.com", "A", "127.0.0.2")
        services.authority.port = authoritative.port
        yield authoritative
        authoritative.clear()

    @pytest.fixture(params=["dns page", "public link page"])
    def page_of(self, request, browser, services, api):
        """The diagnosis page of a domain: the owner's DNS page, or the public page of a new link for it."""

        async def page(owner, domain_id: str) -> str:
            if request.param == "dns page":
                sign_in(browser, services, owner)
                path = f"/site/{domain_id}/dns?diagnose=1"
            else:
                url = (await api.post("/v1/verification-links", {"domainId": domain_id}, token=owner.token)).body["url"]
                path = urlsplit(url).path + "?diagnose=1"
            r = await browser.get(path)
            assert r.code == 200
            return html.unescape(r.body.decode())

        return page

    async def findings(self, api, owner, domain_id: str, code: str) -> list[dict]:
        report = (await api.get(f"/v1/domains/{domain_id}/diagnosis", token=owner.token)).body
        found = [f for f in report["findings"] if f["code"] == code]
        assert found, report["findings"]
        return found

    def assert_shown(self, page: str, findings: list[dict]) -> None:
        """The API's words, naming the page's buttons where the API names its calls."""
        for finding in findings:
            assert in_button_words(finding["message"]) in page
            assert f"<strong>Fix:</strong> {in_button_words(finding['fix'])}" in page

    @pytest.mark.gen_test
    async def test_records_not_published(self, api, world, zone, page_of):
        owner = world.owner()
        d = await new_domain(api, owner)
        page = await page_of(owner, d["id"])
        self.assert_shown(page, await self.findings(api, owner, d["id"], "delegation_missing"))
        self.assert_shown(page, await self.findings(api, owner, d["id"], "ownership_missing"))
        assert f"No CNAME record is published at {self.CNAME_AT}." in page

    @pytest.mark.gen_test
    async def test_records_published_but_not_yet_visible_at_the_resolver(self, api, world, dns, zone, page_of):
        owner = world.owner()
        d = await new_domain(api, owner)
        zone.publish(self.CNAME_AT, "CNAME", d["validation"]["delegation"]["value"])
        zone.publish(self.TXT_AT, "TXT", d["validation"]["ownership"]["value"])
        page = await page_of(owner, d["id"])
        shown = await self.findings(api, owner, d["id"], "not_yet_visible")
        self.assert_shown(page, shown)
        assert f"but the resolver {dns.address} does not see it yet" in page and "Nothing to change: it needs time." in page

    @pytest.mark.gen_test
    async def test_a_txt_record_blocking_the_cname(self, api, world, zone, page_of):
        owner = world.owner()
        d = await new_domain(api, owner)
        zone.publish(self.CNAME_AT, "TXT", "leftover")
        page = await page_of(owner, d["id"])
        self.assert_shown(page, await self.findings(api, owner, d["id"], "delegation_blocked"))
        assert f"<strong>Fix:</strong> Delete the TXT records at {self.CNAME_AT}, then publish a CNAME record" in page

    @pytest.mark.gen_test
    async def test_the_zone_appended_twice(self, api, world, zone, page_of):
        owner = world.owner()
        d = await new_domain(api, owner)
        zone.publish(f"{self.CNAME_AT}.example.com", "CNAME", d["validation"]["delegation"]["value"])
        page = await page_of(owner, d["id"])
        self.assert_shown(page, await self.findings(api, owner, d["id"], "zone_appended_twice"))
        assert f"The CNAME record was published as {self.CNAME_AT}.example.com" in page

    @pytest.mark.gen_test
    async def test_renewal_at_risk(self, api, world, services, clock, zone, page_of):
        owner, cert = await active_domain(api, world, services, clock)
        page = await page_of(owner, cert["domainId"])
        self.assert_shown(page, await self.findings(api, owner, cert["domainId"], "renewal_at_risk"))
        assert f"The certificate is active until {cert['notAfter'][:10]}" in page

    @pytest.mark.gen_test
    async def test_the_edge_providers_view_of_an_active_certificate(self, api, world, services, clock, zone, page_of):
        owner, cert = await active_domain(api, world, services, clock)
        page = await page_of(owner, cert["domainId"])
        assert "What the edge provider says" in page
        assert f"The edge provider's certificate is active, until {cert['notAfter'][:10]}." in page
        assert "It reports the hostname as confirmed: the provider serves it (status active)." in page
        assert "It reports the certificate as issued and served (ssl.status active)." in page

    @pytest.mark.gen_test
    async def test_the_edge_providers_status_and_validation_errors(self, api, world, services, zone, page_of):
        owner = world.owner()
        d = await new_domain(api, owner, apex="fail.example.com")  # the sandbox fails "fail.*" (provider.sandbox.fail_patterns)
        mark_verified(services, d)
        await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)
        page = await page_of(owner, d["id"])
        assert "The edge provider could not issue the certificate." in page
        assert "It reports the hostname as not yet confirmed (status pending)." in page
        assert "It reports the certificate as timed out: the validation records were not found in time (ssl.status validation_timed_out)." in page
        assert "What it said: " in page and "DCV failed: the sandbox fails this hostname" in page
        self.assert_shown(page, await self.findings(api, owner, d["id"], "provider_error"))


class TestPageActionsAreRateLimited:
    """A page action counts in the bucket of the API call it stands for."""

    @pytest.fixture
    def config(self, config):
        from core.config import RateLimitsConfig

        return attrs.evolve(config, rate_limits=RateLimitsConfig(api=3))

    @pytest.mark.gen_test
    async def test_check_now_floods_are_cut_off(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)  # one api hit
        sign_in(browser, services, owner)
        codes = [(await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/dns/check")).code for _ in range(3)]
        assert codes == [303, 303, 429]


class TestKeysPage:
    """/account/keys for owners and admins."""

    @pytest.mark.gen_test
    async def test_a_new_key_is_shown_once(self, browser, services, world):
        sign_in(browser, services, world.owner())
        r = await browser.follow(await browser.submit("/account/keys", "/account/keys",
                                                     {"name": "ci", "scopes": ["domains:read", "domains:write"]}))
        secret = re.search(r'<code id="new-key">(ac_live_\w+)</code>', r.body.decode()).group(1)
        listing = (await browser.get("/account/keys")).body.decode()
        assert "ci" in listing and secret not in listing and secret[:16] in listing

    @pytest.mark.gen_test
    async def test_the_form_offers_an_expiry_date(self, browser, services, world):
        """Issue 48: the API takes ``expiresAt``; the form had no way to give it."""
        sign_in(browser, services, world.owner())
        page = (await browser.get("/account/keys")).body.decode()
        assert re.search(r'<input type="date" name="expiresOn"[^>]*aria-describedby="expires-hint"', page)

    @pytest.mark.gen_test
    async def test_a_key_with_an_expiry_date_stops_at_00_00_utc_that_day(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        made = await browser.follow(await browser.submit("/account/keys", "/account/keys", {
            "name": "ci", "scopes": ["domains:read"], "expiresOn": "2099-01-31"}))
        assert "It works until 2099-01-31 00:00 UTC." in made.body.decode()
        [key] = (await api.get("/v1/api-keys", token=owner.token)).body
        assert key["expiresAt"].startswith("2099-01-31T00:00:00")
        assert "2099-01-31 00:00 UTC" in (await browser.get("/account/keys")).body.decode()

    @pytest.mark.gen_test
    async def test_an_expiry_date_in_the_past_is_refused_and_kept_in_the_form(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        refused = await browser.follow(await browser.submit("/account/keys", "/account/keys", {
            "name": "ci", "scopes": ["domains:read"], "expiresOn": "2001-01-31"}))
        page = html.unescape(refused.body.decode())
        assert "Not created: the expiry, 2001-01-31 00:00 UTC, must be in the future" in page
        assert 'value="2001-01-31"' in page and (await api.get("/v1/api-keys", token=owner.token)).body == []

    @pytest.mark.gen_test
    async def test_an_expiry_that_is_no_date_is_refused(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        refused = await browser.follow(await browser.submit("/account/keys", "/account/keys", {
            "name": "ci", "scopes": ["domains:read"], "expiresOn": "31/01/2099"}))
        assert "\u201c31/01/2099\u201d is not a date" in html.unescape(refused.body.decode())
        assert (await api.get("/v1/api-keys", token=owner.token)).body == []

    @pytest.mark.gen_test
    async def test_revoking_a_key(self, browser, services, world, api):
        owner = world.owner()
        secret = world.key(owner.workspace, ["*"])
        sign_in(browser, services, owner)
        key_id = (await api.get("/v1/api-keys", token=secret)).body[0]["id"]
        assert (await browser.submit(f"/account/keys/{key_id}/revoke", f"/account/keys/{key_id}/revoke")).code == 303
        assert (await api.get("/v1/api-keys", token=secret)).status == 401

    @pytest.mark.gen_test
    @pytest.mark.parametrize("spell", OTHER_SPELLINGS.values(), ids=OTHER_SPELLINGS.keys())
    async def test_a_key_id_in_another_spelling_is_a_not_found_page(self, browser, services, world, api, spell):
        """Issue 45, item 3: neither the confirmation page nor the action takes it; the key stays."""
        owner = world.owner()
        secret = world.key(owner.workspace, ["*"])
        sign_in(browser, services, owner)
        key_id = (await api.get("/v1/api-keys", token=secret)).body[0]["id"]
        spelled = f"/account/keys/{quote(spell(key_id), safe='')}/revoke"
        form = await browser.form_on(f"/account/keys/{key_id}/revoke", f"/account/keys/{key_id}/revoke")
        assert [(await browser.get(spelled)).code, (await browser.post(spelled, form)).code] == [404, 404]
        assert (await api.get("/v1/api-keys", token=secret)).status == 200

    @pytest.mark.gen_test
    async def test_an_operator_may_not_manage_keys(self, browser, services, world):
        owner = world.owner()
        sign_in(browser, services, world.member(owner.workspace, "operator"))
        assert (await browser.get("/account/keys")).code == 403


class TestHeaders:
    """Every page: no framing, no referrer, no cache, a request id."""

    @pytest.mark.gen_test
    async def test_security_headers(self, browser):
        for path in ("/", "/no-such-page"):
            r = await browser.get(path)
            assert r.headers["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
            assert r.headers["Referrer-Policy"] == "no-referrer" and r.headers["X-Content-Type-Options"] == "nosniff"
            assert r.headers["X-Request-Id"] and r.headers["Cache-Control"] == "no-store"


class TestShareAndPublicPage:
    """"Share with your DNS administrator" and the page its link opens."""

    async def shared(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        assert (await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/dns/share",
                                     {"recipientEmail": "dns@customer-test.com"})).code == 303
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        url = re.search(r'<code id="link-1">(http[^<]+/verify/vl_[\w-]+)</code>', page).group(1)
        return owner, d, urlsplit(url).path

    @pytest.mark.gen_test
    async def test_sharing_shows_the_link_on_the_dns_page(self, browser, services, world, api):
        _, _, path = await self.shared(browser, services, world, api)
        assert path.startswith("/verify/vl_")

    @pytest.mark.gen_test
    async def test_the_dns_page_shows_the_newest_twenty_active_links_and_counts_the_rest(self, browser, services, world, api):
        owner, d, _ = await self.shared(browser, services, world, api)
        for _ in range(21):
            assert (await api.post("/v1/verification-links", {"domainId": d["id"]}, token=owner.token)).status == 201
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        assert page.count("/verify/vl_") == 20 and "and 2 older active links" in page

    @pytest.mark.gen_test
    async def test_read_only_may_neither_share_nor_see_links(self, browser, services, world, api):
        owner, d, path = await self.shared(browser, services, world, api)
        reader = Browser(browser.client, browser.base)
        sign_in(reader, services, world.member(owner.workspace, "read_only"))
        page = (await reader.get(f"/site/{d['id']}/dns")).body.decode()
        assert path not in page and 'id="share"' not in page
        assert (await reader.post(f"/site/{d['id']}/dns/share")).code == 403

    @pytest.mark.gen_test
    async def test_the_public_page_shows_the_records_and_nothing_of_the_workspace(self, browser, services, world, api, http_client, base_url):
        owner, d, path = await self.shared(browser, services, world, api)
        stranger = Browser(http_client, base_url)
        page = (await stranger.get(path)).body.decode()
        assert d["validation"]["delegation"]["value"] in page and d["validation"]["ownership"]["value"] in page
        assert "_acme-challenge<wbr>.shop</code>" in page and owner.workspace.name not in page and "Sign out" not in page

    @pytest.mark.gen_test
    async def test_check_now_on_the_public_page_verifies(self, browser, services, world, api, http_client, base_url, dns):
        _, d, path = await self.shared(browser, services, world, api)
        dns.publish("_acme-challenge.shop.example.com", "CNAME", d["validation"]["delegation"]["value"])
        dns.publish("_service-verify.shop.example.com", "TXT", d["validation"]["ownership"]["value"])
        stranger = Browser(http_client, base_url)
        await stranger.get(path)
        assert (await stranger.post(path)).code == 303
        page = (await stranger.get(path)).body.decode()
        assert '<strong id="validation-status">verified</strong>' in page and "Both DNS records are in place" in page

    @pytest.mark.gen_test
    async def test_the_public_page_diagnoses_too(self, browser, services, world, api, http_client, base_url, dns):
        _, _, path = await self.shared(browser, services, world, api)
        dns.publish("_acme-challenge.shop.example.com", "TXT", "leftover")
        stranger = Browser(http_client, base_url)
        page = (await stranger.get(path + "?diagnose=1")).body.decode()
        assert "a CNAME cannot share its name with other records" in page
        assert "<strong>Fix:</strong> Delete the TXT records at _acme-challenge.shop.example.com" in page

    @pytest.mark.gen_test
    async def test_an_expired_link_says_so(self, browser, services, world, api, clock):
        _, _, path = await self.shared(browser, services, world, api)
        clock.advance(8 * 86400)
        r = await browser.get(path)
        assert r.code == 410 and b"expired on" in r.body

    @pytest.mark.gen_test
    async def test_an_unknown_link_is_not_found(self, browser):
        r = await browser.get("/verify/vl_" + "x" * 43)
        assert r.code == 404 and b"does not exist" in r.body

    @pytest.mark.gen_test
    async def test_a_token_that_is_not_utf8_is_not_found_like_any_unknown_one(self, browser):
        r = await browser.get("/verify/%FF")
        assert r.code == 404 and b"does not exist" in r.body


class TestTokensStayOutOfLogs:
    """A verification link's token travels in the path; no log line may hold it."""

    @pytest.mark.gen_test
    async def test_a_form_without_xsrf_logs_no_token(self, browser, services, world, api, caplog, http_client, base_url):
        _, _, path = await TestShareAndPublicPage().shared(browser, services, world, api)
        token = path.rsplit("/", 1)[1]
        stranger = Browser(http_client, base_url)
        with caplog.at_level("INFO"):
            r = await stranger.request("POST", path, {"_xsrf": "missing"})
        assert r.code == 403
        assert not any(token in record.getMessage() for record in caplog.records)

    @pytest.mark.gen_test
    async def test_a_percent_encoded_token_is_redacted_too(self, browser, services, world, api, caplog):
        _, _, path = await TestShareAndPublicPage().shared(browser, services, world, api)
        token = path.rsplit("/", 1)[1]
        with caplog.at_level("INFO", logger="access"):
            assert (await browser.get(path.replace("/vl_", "/%76l_"))).code == 200
        lines = [record.getMessage() for record in caplog.records if record.name == "access"]
        assert lines and not any(token[3:] in line for line in lines)
