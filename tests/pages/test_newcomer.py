"""What a newcomer met in their first hour (issue 40), each as a browser without JavaScript meets it:
the sandbox says what it simulates, a domain waiting on a check says what comes next and names the
address its script polls, several hostnames are added at once and answered line by line, rotating
or revoking an API key asks first, a refused form answers with a redirect, a 403 page says why,
and the smaller things: reminders without e-mail, signing up again, a sign-in that cannot
succeed, role words, leaving, the words of the failure texts."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, urlsplit

import attrs
import pytest

from core.config import (
    CloudflareConfig,
    LifecycleConfig,
    OidcConfig,
    ProviderConfig,
    SandboxConfig,
    ServerConfig,
    SmtpConfig,
)
from core.identity import team
from core.identity.auth import Principal
from tests.api import test_verification_links as link_fixtures
from tests.helpers import active_domain, mark_verified
from tests.pages.portal_client import Browser, hidden_fields, new_domain, sign_in

smtp_server, smtp = link_fixtures.smtp_server, link_fixtures.smtp
KEYS = "/account/keys"


def text_of(page) -> str:
    """The page's words, tags dropped, entities read and spaces collapsed, as a reader sees them."""
    words = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.body.decode())))
    return words.replace(" .", ".").replace(" ,", ",")


async def link_path(api, owner, domain: dict, **fields) -> str:
    url = (await api.post("/v1/verification-links", {"domainId": domain["id"], **fields}, token=owner.token)).body["url"]
    return urlsplit(url).path


class TestSandboxBanner:
    @pytest.mark.gen_test
    async def test_every_page_says_the_certificates_are_simulated(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        public = [await Browser(browser.client, browser.base).get(path) for path in ("/", "/no-such-page",
                                                                                  await link_path(api, owner, d))]
        sign_in(browser, services, owner)
        signed_in = [await browser.get(path) for path in ("/domains", f"/site/{d['id']}/dns", "/account", KEYS)]
        for page in (*public, *signed_in):
            assert "Sandbox: certificates here are simulated and trusted by no browser." in text_of(page), page.effective_url

    @pytest.mark.gen_test
    async def test_with_real_dns_the_banner_names_only_the_certificates(self, browser):
        banner = re.search(r'<p class="sandbox" id="sandbox-banner">(.*?)</p>', (await browser.get("/")).body.decode(),
                           re.DOTALL).group(1)
        assert "certificates here are simulated" in banner and "DNS" not in banner


class TestSimulatedDns:
    @pytest.fixture
    def config(self, config):
        sandbox = SandboxConfig(simulate_dns=True, simulate_dns_delay_seconds=5)
        return attrs.evolve(config, provider=ProviderConfig(kind="sandbox", sandbox=sandbox))

    @pytest.mark.gen_test
    async def test_the_banner_says_dns_is_simulated_with_its_delay(self, browser):
        assert ("DNS is simulated too: a domain's two records count as published 5 s after it is added, without being "
                "published anywhere.") in text_of(await browser.get("/"))

    @pytest.mark.gen_test
    async def test_the_dns_page_does_not_ask_to_publish_the_records(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = await browser.get(f"/site/{d['id']}/dns")
        assert "Publish these two records" not in text_of(page) and 'id="records-simulated"' in page.body.decode()

    @pytest.mark.gen_test
    async def test_before_the_first_check_it_says_nothing_needs_doing(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        assert ("DNS is simulated here: both records count as published 5 s after the domain was added, so that check "
                "finds them: nothing needs doing.") in text_of(await browser.get(f"/site/{d['id']}/dns"))


class TestRealProvider:
    @pytest.fixture
    def config(self, config):
        cloudflare = CloudflareConfig(api_base="http://127.0.0.1:9/client/v4", zone_id="0" * 32, api_token="t")
        return attrs.evolve(config, provider=ProviderConfig(kind="cloudflare", cloudflare=cloudflare))

    @pytest.mark.gen_test
    async def test_no_banner_is_shown(self, browser):
        assert 'id="sandbox-banner"' not in (await browser.get("/")).body.decode()


class TestLiveStatus:
    """A domain waiting on a check: its page names the address its script polls (data-poll), which
    answers the page's refreshing parts; nothing is polled once nothing waits."""

    @pytest.mark.gen_test
    async def test_a_waiting_domains_page_names_its_status_address_and_the_seconds_to_the_check(
            self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        poll = re.search(r'data-poll="([^"]+)" data-poll-after="(\d+)"', page)
        assert poll is not None and poll.group(1) == f"/site/{d['id']}/status" and 60 <= int(poll.group(2)) <= 72

    @pytest.mark.gen_test
    async def test_the_status_address_answers_the_status_line_and_where_things_stand(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        r = await browser.get(f"/site/{d['id']}/status")
        fragment = r.body.decode()
        assert r.code == 200 and r.headers["Content-Type"].startswith("text/html")
        assert '<p id="status-line" data-live>' in fragment and '<section id="standing" data-live' in fragment
        assert "<html" not in fragment and "Not checked yet; first check at" in fragment

    @pytest.mark.gen_test
    async def test_the_status_shows_what_a_check_found_since_the_page_was_loaded(self, browser, services, world, api, dns):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        await browser.get(f"/site/{d['id']}/dns")
        dns.publish("_acme-challenge.shop.example.com", "CNAME", d["validation"]["delegation"]["value"])
        dns.publish("_service-verify.shop.example.com", "TXT", d["validation"]["ownership"]["value"])
        await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)
        fragment = (await browser.get(f"/site/{d['id']}/status")).body.decode()
        assert '<strong id="validation-status">verified</strong>' in fragment

    @pytest.mark.gen_test
    async def test_a_pending_certificate_says_the_next_check_reads_it(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        mark_verified(services, d)
        await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)
        sign_in(browser, services, owner)
        page = text_of(await browser.get(f"/site/{d['id']}/dns"))
        assert "The edge provider is issuing the certificate; the next check, at" in page
        assert "Nothing needs doing: this page shows the result when it comes." in page
        assert "check again in a little while" not in page

    @pytest.mark.gen_test
    async def test_once_nothing_waits_nothing_is_polled(self, browser, services, world, api, clock):
        owner, cert = await active_domain(api, world, services, clock)
        sign_in(browser, services, owner)
        for path in (f"/site/{cert['domainId']}/dns", f"/site/{cert['domainId']}/status", "/domains", "/domains/status"):
            page = await browser.get(path)
            assert page.code == 200 and "data-live" in page.body.decode(), path
            assert "data-poll" not in page.body.decode(), path

    @pytest.mark.gen_test
    async def test_the_domains_list_with_a_waiting_domain_names_its_rows_address(self, browser, services, world, api):
        owner = world.owner()
        await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get("/domains?q=shop")).body.decode()
        poll = re.search(r'<tbody id="domain-rows" data-live data-poll="([^"]+)" data-poll-after="(\d+)"', page)
        assert poll is not None and poll.group(1) == "/domains/status?q=shop" and 60 <= int(poll.group(2)) <= 72

    @pytest.mark.gen_test
    async def test_the_rows_address_answers_the_rows_as_a_check_left_them(self, browser, services, world, api, dns):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        await browser.get("/domains")
        dns.publish("_acme-challenge.shop.example.com", "CNAME", d["validation"]["delegation"]["value"])
        dns.publish("_service-verify.shop.example.com", "TXT", d["validation"]["ownership"]["value"])
        await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)
        r = await browser.get("/domains/status")
        rows = r.body.decode()
        assert r.code == 200 and rows.strip().startswith('<table><tbody id="domain-rows" data-live') and "<html" not in rows
        assert '<td data-label="DNS">verified</td>' in rows

    @pytest.mark.gen_test
    async def test_a_verification_links_page_polls_its_own_status_address(self, browser, world, api):
        owner = world.owner()
        path = await link_path(api, owner, await new_domain(api, owner))
        assert f'data-poll="{path}/status"' in (await browser.get(path)).body.decode()
        fragment = await browser.get(f"{path}/status")
        assert fragment.code == 200 and '<section id="standing" data-live' in fragment.body.decode()

    @pytest.mark.gen_test
    async def test_a_revoked_links_status_says_it_was_revoked(self, browser, world, api):
        owner = world.owner()
        link = (await api.post("/v1/verification-links", {"domainId": (await new_domain(api, owner))["id"]},
                               token=owner.token)).body
        await api.post(f"/v1/verification-links/{link['id']}/revoke", token=owner.token)
        r = await browser.get(urlsplit(link["url"]).path + "/status")
        assert r.code == 410 and "revoked" in text_of(r)

    @pytest.mark.gen_test
    async def test_another_workspaces_domain_has_no_status_here(self, browser, services, world, api):
        d = await new_domain(api, world.owner())
        sign_in(browser, services, world.owner())
        assert (await browser.get(f"/site/{d['id']}/status")).code == 404

    @pytest.mark.gen_test
    async def test_a_signed_out_visitor_is_sent_to_sign_in(self, browser, world, api):
        d = await new_domain(api, world.owner())
        r = await browser.get(f"/site/{d['id']}/status")
        assert r.code == 302 and r.headers["Location"].startswith("/login")

    @pytest.mark.gen_test
    async def test_polling_leaves_a_message_for_the_page(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        checked = await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/dns/check")
        await browser.get(f"/site/{d['id']}/status")
        assert 'class="flash"' in (await browser.follow(checked)).body.decode()


class TestLiveStatusWithChecksOff:
    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, lifecycle=LifecycleConfig(enabled=False))

    @pytest.mark.gen_test
    async def test_nothing_is_polled_when_no_check_will_come(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = await browser.get(f"/site/{d['id']}/dns")
        assert "data-poll" not in page.body.decode()
        assert "Not checked yet. Publish both records, then press Check now." in text_of(page)


class TestBulkAdd:
    async def add(self, browser, services, owner, text: str):
        sign_in(browser, services, owner)
        return await browser.submit("/domains", "/domains", {"hostnames": text})

    async def lines(self, browser, answer) -> list[str]:
        page = (await browser.follow(answer)).body.decode()
        rows = re.findall(r'<tr id="line-\d+">(.*?)</tr>', page, re.DOTALL)
        return [html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", row))).strip() for row in rows]

    @pytest.mark.gen_test
    async def test_one_hostname_per_line_adds_each_and_answers_line_by_line(self, browser, services, world, api):
        owner = world.owner()
        answer = await self.add(browser, services, owner, "one.example.com\r\ntwo.example.com\r\n")
        assert re.fullmatch(r"/domains/added/[0-9a-f]{32}", answer.headers["Location"])
        assert await self.lines(browser, answer) == ["one.example.com Added: DNS records of one.example.com",
                                                     "two.example.com Added: DNS records of two.example.com"]
        listed = (await api.post("/v1/domains/query", {}, token=owner.token)).body["items"]
        assert sorted(item["apex"] for item in listed) == ["one.example.com", "two.example.com"]

    @pytest.mark.gen_test
    async def test_hostnames_pasted_with_commas_are_added_each(self, browser, services, world, api):
        owner = world.owner()
        await self.add(browser, services, owner, "one.example.com, two.example.com,three.example.com")
        assert (await api.post("/v1/domains/query", {}, token=owner.token)).body["total"] == 3

    @pytest.mark.gen_test
    async def test_a_refused_line_says_why_and_the_others_are_added(self, browser, services, world):
        answer = await self.add(browser, services, world.owner(), "shop.example.com\nlocalhost\nsh_op.example.com")
        assert (await self.lines(browser, answer))[1:] == [
            "localhost Not added: 'localhost' has a single label; a hostname needs at least two (like shop.example.com).",
            "sh_op.example.com Not added: 'sh_op.example.com' contains an underscore, which hostnames may not."]

    @pytest.mark.gen_test
    async def test_a_line_with_spaces_is_one_entry_refused_as_one(self, browser, services, world):
        """Issue 48: ``not a hostname`` was split into three rows, "Of 5 hostnames" for three lines."""
        answer = await self.add(browser, services, world.owner(), "one.example.com\nnot a hostname\ntwo.example.com")
        page = (await browser.follow(answer)).body.decode()
        rows = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", row)).strip()
                for row in re.findall(r'<tr id="line-\d+">(.*?)</tr>', page, re.DOTALL)]
        assert [row.split(" Not added: ")[0] for row in rows] == [
            "one.example.com Added: DNS records of one.example.com", "not a hostname",
            "two.example.com Added: DNS records of two.example.com"]
        assert '<p class="flash" role="status">Of 3 hostnames: 2 added, 1 not added.</p>' in page

    @pytest.mark.gen_test
    async def test_spaces_around_a_hostname_are_no_part_of_it(self, browser, services, world, api):
        owner = world.owner()
        await self.add(browser, services, owner, "  one.example.com \t\n two.example.com ,  three.example.com")
        listed = (await api.post("/v1/domains/query", {}, token=owner.token)).body["items"]
        assert sorted(item["apex"] for item in listed) == ["one.example.com", "three.example.com", "two.example.com"]

    @pytest.mark.gen_test
    async def test_a_hostname_already_in_the_workspace_is_said_to_be_there(self, browser, services, world, api):
        owner = world.owner()
        await new_domain(api, owner, "shop.example.com")
        answer = await self.add(browser, services, owner, "shop.example.com\nnew.example.com")
        assert (await self.lines(browser, answer))[0] == "shop.example.com Already here: shop.example.com"

    @pytest.mark.gen_test
    async def test_a_repeated_hostname_is_added_once(self, browser, services, world):
        answer = await self.add(browser, services, world.owner(), "shop.example.com\nSHOP.example.com")
        assert (await self.lines(browser, answer))[1] == (
            "SHOP.example.com Not added: Duplicate of 'shop.example.com' earlier in apexList.")

    @pytest.mark.gen_test
    async def test_the_flash_sums_up_the_answer(self, browser, services, world):
        answer = await self.add(browser, services, world.owner(), "one.example.com\nlocalhost")
        page = (await browser.follow(answer)).body.decode()
        assert '<p class="flash" role="status">Of 2 hostnames: 1 added, 1 not added.</p>' in page

    @pytest.mark.gen_test
    async def test_the_refused_lines_can_be_corrected_on_the_domains_page(self, browser, services, world):
        answer = await self.add(browser, services, world.owner(), "one.example.com\nlocalhost\nx_y.example.com")
        page = (await browser.follow(answer)).body.decode()
        again = re.search(r'href="(/domains\?add=[^"]+)" id="again"', page).group(1).replace("&amp;", "&")
        assert parse_qs(urlsplit(again).query)["add"] == ["localhost\nx_y.example.com"]
        assert ">localhost\nx_y.example.com</textarea>" in (await browser.get(again)).body.decode()

    @pytest.mark.gen_test
    async def test_the_answer_is_only_for_the_person_who_sent_the_form(self, browser, http_client, base_url, services, world):
        owner = world.owner()
        answer = await self.add(browser, services, owner, "one.example.com\ntwo.example.com")
        colleague = Browser(http_client, base_url)
        sign_in(colleague, services, world.member(owner.workspace, "admin"))
        assert (await colleague.get(answer.headers["Location"])).code == 404

    @pytest.mark.gen_test
    async def test_an_empty_form_says_what_to_type(self, browser, services, world):
        answer = await self.add(browser, services, world.owner(), " \n ,")
        assert answer.headers["Location"] == "/domains"
        assert "Not added: Type a hostname, or several: one per line." in text_of(await browser.follow(answer))

    @pytest.mark.gen_test
    async def test_more_than_the_bulk_limit_is_refused_with_the_limit(self, browser, services, world, api):
        owner = world.owner()
        answer = await self.add(browser, services, owner, "\n".join(f"h{n}.example.com" for n in range(501)))
        assert "Must hold 1 to 500 hostnames (got 501)" in text_of(await browser.follow(answer))
        assert (await api.post("/v1/domains/query", {}, token=owner.token)).body["total"] == 0


class TestKeyConfirmation:
    async def key_id(self, api, owner) -> str:
        return (await api.get("/v1/api-keys", token=owner.token)).body[0]["id"]

    @pytest.mark.parametrize("action", ["rotate", "revoke"])
    @pytest.mark.gen_test
    async def test_the_keys_page_asks_first(self, browser, services, world, api, action):
        owner = world.owner()
        world.key(owner.workspace, ["domains:read"], name="deploy")
        key_id = await self.key_id(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(KEYS)).body.decode()
        assert f'action="{KEYS}/{key_id}/{action}"' not in page and f'href="{KEYS}/{key_id}/{action}"' in page

    @pytest.mark.parametrize("action", ["rotate", "revoke"])
    @pytest.mark.gen_test
    async def test_the_confirmation_names_the_key_and_what_happens(self, browser, services, world, api, action):
        owner = world.owner()
        world.key(owner.workspace, ["domains:read"], name="deploy")
        sign_in(browser, services, owner)
        page = text_of(await browser.get(f"{KEYS}/{await self.key_id(api, owner)}/{action}"))
        assert f"{action.capitalize()} the key “deploy”?" in page
        assert ("The old secret stops working at once" if action == "rotate" else "It stops for good") in page

    @pytest.mark.parametrize("action", ["rotate", "revoke"])
    @pytest.mark.gen_test
    async def test_a_form_not_sent_from_the_confirmation_changes_nothing(self, browser, services, world, api, action):
        owner = world.owner()
        secret = world.key(owner.workspace, ["domains:read"], name="deploy")
        key_id = await self.key_id(api, owner)
        sign_in(browser, services, owner)
        r = await browser.post(f"{KEYS}/{key_id}/{action}", await browser.tokens(KEYS))
        assert (r.code, r.headers["Location"]) == (303, f"{KEYS}/{key_id}/{action}")
        assert (await api.post("/v1/domains/query", {}, token=secret)).status == 200

    @pytest.mark.gen_test
    async def test_revoking_from_the_confirmation_stops_the_key(self, browser, services, world, api):
        owner = world.owner()
        secret = world.key(owner.workspace, ["domains:read"], name="deploy")
        confirm = f"{KEYS}/{await self.key_id(api, owner)}/revoke"
        sign_in(browser, services, owner)
        r = await browser.submit(confirm, confirm)
        assert (r.code, r.headers["Location"]) == (303, KEYS)
        assert (await api.post("/v1/domains/query", {}, token=secret)).status == 401


class TestRefusedFormsRedirect:
    """Post/redirect/get for refused forms too: the address bar then holds a page, a reload sends
    nothing again, and the reason is shown once."""

    @pytest.mark.gen_test
    async def test_a_refused_invitation_leads_back_to_the_team_page(self, browser, services, world):
        sign_in(browser, services, world.owner())
        r = await browser.submit("/team", "/team/invitations", {"email": "not an address", "role": "admin"})
        assert (r.code, r.headers["Location"]) == (303, "/team")

    @pytest.mark.gen_test
    async def test_the_reason_is_shown_once(self, browser, services, world):
        sign_in(browser, services, world.owner())
        await browser.submit("/team", "/team/invitations", {"email": "not an address", "role": "admin"})
        assert 'id="team-error"' in (await browser.get("/team")).body.decode()
        assert 'id="team-error"' not in (await browser.get("/team")).body.decode()

    @pytest.mark.gen_test
    async def test_a_reason_for_another_page_is_not_shown_here(self, browser, services, world):
        sign_in(browser, services, world.owner())
        await browser.submit("/team", "/team/invitations", {"email": "not an address", "role": "admin"})
        assert 'id="add-error"' not in (await browser.get("/domains")).body.decode()
        assert 'id="team-error"' not in (await browser.get("/team")).body.decode()

    @pytest.mark.gen_test
    async def test_a_refused_key_keeps_its_name(self, browser, services, world):
        sign_in(browser, services, world.owner())
        r = await browser.submit(KEYS, KEYS, {"name": "x" * 201, "scopes": ["domains:read"]})
        page = (await browser.follow(r)).body.decode()
        assert r.headers["Location"] == KEYS and 'id="key-error"' in page and f'value="{"x" * 201}"' in page

    @pytest.mark.gen_test
    async def test_a_refused_hostname_is_kept_on_the_domains_page(self, browser, services, world):
        sign_in(browser, services, world.owner())
        r = await browser.submit("/domains", "/domains", {"hostnames": "shop.example.com:8443"})
        page = (await browser.follow(r)).body.decode()
        assert ">shop.example.com:8443</textarea>" in page and "leave out the scheme, port and path" in page


class TestForbiddenPages:
    @pytest.mark.gen_test
    async def test_a_403_page_names_the_roles_that_may_and_the_persons_own(self, browser, services, world):
        owner = world.owner(name="Acme")
        sign_in(browser, services, world.member(owner.workspace, "read_only"))
        r = await browser.post("/domains", {**await browser.tokens("/domains"), "hostnames": "new.example.com"})
        assert r.code == 403
        assert "Only an owner, admin or operator of Acme may do this; you are read-only there." in text_of(r)

    @pytest.mark.gen_test
    async def test_a_page_for_owners_and_admins_says_so(self, browser, services, world):
        owner = world.owner(name="Acme")
        sign_in(browser, services, world.member(owner.workspace, "operator"))
        assert "Only an owner or admin of Acme may do this; you are operator there." in text_of(await browser.get("/team"))


class TestReminders:
    @pytest.mark.gen_test
    async def test_without_e_mail_no_reminder_is_offered_and_the_page_says_why(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        await link_path(api, owner, d, recipientEmail="dns-admin@customer-test.com")
        sign_in(browser, services, owner)
        page = await browser.get(f"/site/{d['id']}/dns")
        assert "/remind" not in page.body.decode()
        assert "This service sends no e-mail: copy the link and send it yourself." in text_of(page)


class TestRemindersRefused:
    @pytest.fixture
    def config(self, config, smtp):
        return attrs.evolve(config, smtp=SmtpConfig(host=smtp.host, port=smtp.port, starttls=False, timeout_seconds=2))

    @pytest.mark.gen_test
    async def test_a_refused_reminder_is_said_by_its_link(self, browser, services, world, api, smtp):
        owner = world.owner()
        d = await new_domain(api, owner)
        link = (await api.post("/v1/verification-links", {"domainId": d["id"], "recipientEmail": "a@customer-test.com"},
                               token=owner.token)).body
        sign_in(browser, services, owner)
        dns_page, remind = f"/site/{d['id']}/dns", f"/site/{d['id']}/links/{link['id']}/remind"
        await browser.submit(dns_page, remind)
        r = await browser.submit(dns_page, remind)  # again at once: too soon
        assert r.headers["Location"] == f"{dns_page}#link-{link['id']}"
        page = (await browser.follow(r)).body.decode()
        row = re.search(rf'<div class="link" id="link-{link["id"]}">(.*?)</div>\s*</div>', page, re.DOTALL).group(1)
        assert '<p class="flash" role="status">No reminder was sent' in row
        assert page.count('class="flash"') == 1


class TestSigningUpAgain:
    @pytest.mark.gen_test
    async def test_an_e_mail_with_an_account_is_told_so_and_keeps_the_hostname(self, browser, world):
        world.owner("me@example.com")
        page = await browser.follow(await browser.post("/signup", {"email": "me@example.com", "domain": "new.example.com"}))
        body = page.body.decode()
        assert "<title>You already have an account</title>" in body and "Signed up" not in body
        login = re.search(r'href="(/login\?[^"]+)"', body).group(1).replace("&amp;", "&")
        assert parse_qs(urlsplit(login).query)["next"] == ["/domains?add=new.example.com"]

    @pytest.mark.gen_test
    async def test_the_domains_page_fills_in_a_hostname_to_add(self, browser, services, world):
        sign_in(browser, services, world.owner())
        assert ">new.example.com</textarea>" in (await browser.get("/domains?add=new.example.com")).body.decode()


class TestSignInThatCannotSucceed:
    @pytest.fixture
    def config(self, config, http_port):
        here = f"http://127.0.0.1:{http_port}"  # no issuer: the built-in identity provider signs in
        return attrs.evolve(config, oidc=OidcConfig(), server=ServerConfig(base_url=here, portal_url=here))

    @pytest.mark.gen_test
    async def test_an_account_without_a_workspace_is_offered_sign_up_and_another_account(self, browser):
        provider = (await browser.get("/login")).headers["Location"]
        form = hidden_fields((await browser.get(provider)).body.decode(), "/idp/authorize")
        back = await browser.post("/idp/authorize", {**form, "email": "stranger@example.com"})
        page = await browser.follow(await browser.get(back.headers["Location"]))
        body = page.body.decode()
        assert page.code == 403 and 'href="/signup" id="sign-up"' in body
        assert 'href="/login?prompt=select_account" id="another-account"' in body and "Start again" not in body

    @pytest.mark.gen_test
    async def test_a_stale_sign_in_offers_to_start_again_or_to_sign_up(self, browser):
        page = await browser.follow(await browser.get("/auth/callback?code=stale&state=stale"))
        body = page.body.decode()
        assert page.code == 400 and "<title>Sign-in failed</title>" in body
        assert '<a class="button" href="/login">Start again</a>' in body and 'href="/signup"' in body

    @pytest.mark.gen_test
    async def test_signing_in_then_forgets_what_the_failed_sign_in_said(self, browser):
        await browser.post("/signup", {"email": "me@example.com", "domain": "shop.example.com"})
        await browser.follow(await browser.get("/auth/callback?code=stale&state=stale"))
        assert "cps_signin_failed" in browser.cookies
        provider = (await browser.get("/login")).headers["Location"]
        form = hidden_fields((await browser.get(provider)).body.decode(), "/idp/authorize")
        back = await browser.post("/idp/authorize", {**form, "email": "me@example.com"})
        assert (await browser.get(back.headers["Location"])).code == 302  # signed in
        assert "cps_signin_failed" not in browser.cookies

    @pytest.mark.gen_test
    async def test_sign_in_asks_the_provider_to_let_the_person_choose_an_account(self, browser):
        r = await browser.get("/login?prompt=select_account")
        assert parse_qs(urlsplit(r.headers["Location"]).query)["prompt"] == ["select_account"]

    @pytest.mark.gen_test
    async def test_no_other_prompt_is_passed_on(self, browser):
        r = await browser.get("/login?prompt=none")
        assert "prompt" not in parse_qs(urlsplit(r.headers["Location"]).query)


class TestRoleWords:
    @pytest.mark.gen_test
    async def test_the_account_page_says_read_only_as_the_team_page_does(self, browser, services, world):
        owner = world.owner()
        sign_in(browser, services, world.member(owner.workspace, "read_only", "reader@example.com"))
        page = (await browser.get("/account")).body.decode()
        assert "where you are <strong>read-only</strong>" in page and "read_only" not in page

    @pytest.mark.gen_test
    async def test_joining_as_read_only_is_said_in_the_same_word(self, browser, services, world):
        owner = world.owner(name="Acme")
        invitation = team.invite(services, principal=Principal(workspace=owner.workspace, user=owner.user, role="owner"),
                                 request=team.Invite(email="guest@example.com", role="read_only"))
        sign_in(browser, services, attrs.evolve(owner, token=world.session_token("guest@example.com")))
        page = await browser.follow(await browser.submit("/account", f"/account/accept/{invitation.id}"))
        assert "You joined Acme as read-only." in text_of(page)


class TestLeaving:
    @pytest.mark.gen_test
    async def test_the_only_owner_is_not_offered_leave_and_is_told_how(self, browser, services, world):
        owner = world.owner()
        sign_in(browser, services, owner)
        page = await browser.get("/account")
        assert f"/account/leave/{owner.workspace.id}" not in page.body.decode()
        assert "You are its only owner: to leave it, make another member an owner on its Team page first." in text_of(page)

    @pytest.mark.gen_test
    async def test_an_owner_among_others_may_leave(self, browser, services, world):
        owner = world.owner()
        world.member(owner.workspace, "owner")
        sign_in(browser, services, owner)
        assert f"/account/leave/{owner.workspace.id}" in (await browser.get("/account")).body.decode()


class TestButtonWords:
    @pytest.mark.gen_test
    async def test_a_failed_certificate_names_the_check_now_button_not_api_calls(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner, apex="fail.example.com")  # the sandbox fails "fail.*"
        mark_verified(services, d)
        await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns?diagnose=1")).body.decode()
        assert "then press “Check now” to have it validate again" in page
        assert "verify-delegation" not in page and "recheck" not in page and "/v1/" not in page

    @pytest.mark.gen_test
    async def test_check_now_finding_nothing_points_to_the_diagnose_button(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = await browser.follow(await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/dns/check"))
        flash = re.search(r'<p class="flash" role="status">(.*?)</p>', page.body.decode(), re.DOTALL).group(1)
        assert "The diagnosis names the exact fix: press “Diagnose”." in html.unescape(flash) and "/v1/" not in flash

    @pytest.mark.gen_test
    async def test_a_certificate_being_issued_asks_to_wait_for_the_next_check(self, browser, services, world, api, dns):
        owner = world.owner()
        d = await new_domain(api, owner)
        dns.publish("_acme-challenge.shop.example.com", "CNAME", d["validation"]["delegation"]["value"])
        dns.publish("_service-verify.shop.example.com", "TXT", d["validation"]["ownership"]["value"])
        sign_in(browser, services, owner)
        page = await browser.follow(await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/dns/check"))
        flash = html.unescape(re.search(r'<p class="flash" role="status">(.*?)</p>', page.body.decode(), re.DOTALL).group(1))
        assert "keep both DNS records in place and wait: the next check reads how far it has got." in flash
        assert "refresh" not in flash

    @pytest.mark.gen_test
    async def test_the_api_keeps_its_words(self, world, api, services):
        owner = world.owner()
        d = await new_domain(api, owner, apex="fail.example.com")
        mark_verified(services, d)
        await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)
        stored = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert "verify them again (verify-delegation or recheck" in stored["cert"]["lastError"]
