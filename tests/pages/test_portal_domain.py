"""The portal's actions on a domain, its verification links and API keys (handlers/portal/domain.py)
and the HTTPS test on the DNS page: each as a browser without JavaScript uses it, checked against
what the API then says."""

from __future__ import annotations

import datetime as dt
import re
from urllib.parse import urlsplit

import attrs
import pytest

from core.config import NetworkConfig, RateLimitsConfig, SiteScanConfig, SmtpConfig
from tests.api import test_site_scan as scan_fixtures
from tests.api import test_verification_links as link_fixtures
from tests.helpers import active_domain
from tests.pages.portal_client import Browser, new_domain, sign_in

KEYS = "/account/keys"
RECIPIENT = link_fixtures.RECIPIENT

# The API tests' servers: a TLS server with test CAs for the scan, an SMTP server for reminders.
cas, ca_bundle, tls, site = scan_fixtures.cas, scan_fixtures.ca_bundle, scan_fixtures.tls, scan_fixtures.site
smtp_server, smtp = link_fixtures.smtp_server, link_fixtures.smtp


def text_of(page) -> str:
    """The page's words, tags dropped and spaces collapsed, as a reader sees them."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.body.decode())).replace(" .", ".")


def flash_of(page) -> str:
    return re.search(r'<p class="flash" role="status">([^<]*)</p>', page.body.decode()).group(1)


async def signed_in_owner(browser, services, world, api, apex="shop.example.com"):
    owner = world.owner()
    sign_in(browser, services, owner)
    return owner, await new_domain(api, owner, apex)


class TestEdit:
    """Notes, tags and client on the DNS page (PATCH /v1/domains/:id)."""

    @pytest.mark.gen_test
    async def test_saved_notes_and_tags_are_on_the_page_and_in_the_api(self, browser, services, world, api):
        owner, d = await signed_in_owner(browser, services, world, api)
        dns_page, action = f"/site/{d['id']}/dns", f"/site/{d['id']}/edit"
        r = await browser.submit(dns_page, action, {"tags": " eu, vip ,,", "notes": "Call Anna first\r\nthen Bo"})
        assert (r.code, r.headers["Location"]) == (303, dns_page)
        page = await browser.follow(r)
        assert "eu, vip" in text_of(page) and "Call Anna first<br>then Bo" in page.body.decode()
        stored = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert (stored["tags"], stored["notes"]) == (["eu", "vip"], "Call Anna first\nthen Bo")

    @pytest.mark.gen_test
    async def test_a_chosen_client_is_on_the_page_and_in_the_api(self, browser, services, world, api):
        owner, d = await signed_in_owner(browser, services, world, api)
        client = (await api.post("/v1/clients", {"name": "Customer A"}, token=owner.token)).body
        dns_page = f"/site/{d['id']}/dns"
        page = await browser.follow(await browser.submit(dns_page, f"/site/{d['id']}/edit", {"clientId": client["id"]}))
        assert '<dd id="domain-client">Customer A</dd>' in page.body.decode()
        assert f'<option value="{client["id"]}" selected>' in page.body.decode()
        assert (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body["clientId"] == client["id"]

    @pytest.mark.gen_test
    async def test_choosing_none_takes_the_domain_off_its_client(self, browser, services, world, api):
        owner = world.owner()
        client = (await api.post("/v1/clients", {"name": "Customer A"}, token=owner.token)).body
        d = (await api.post("/v1/domains", {"apex": "shop.example.com", "clientId": client["id"]}, token=owner.token)).body
        sign_in(browser, services, owner)
        await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/edit", {"clientId": ""})
        assert "clientId" not in (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body

    @pytest.mark.gen_test
    async def test_an_unknown_client_is_refused_in_words(self, browser, services, world, api):
        other = world.owner()
        theirs = (await api.post("/v1/clients", {"name": "Theirs"}, token=other.token)).body
        owner, d = await signed_in_owner(browser, services, world, api)
        r = await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/edit", {"clientId": theirs["id"]})
        assert (r.code, r.headers["Location"]) == (303, f"/site/{d['id']}/edit")
        assert "Not saved: Client not found." in text_of(await browser.follow(r))
        assert "clientId" not in (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body

    @pytest.mark.gen_test
    async def test_emptied_fields_clear_the_notes_and_tags(self, browser, services, world, api):
        owner, d = await signed_in_owner(browser, services, world, api)
        await api.patch(f"/v1/domains/{d['id']}", {"tags": ["eu"], "notes": "old"}, token=owner.token)
        await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/edit", {"tags": "", "notes": ""})
        stored = (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body
        assert stored["tags"] == [] and "notes" not in stored

    @pytest.mark.gen_test
    async def test_a_tag_too_long_is_refused_in_words_and_the_input_kept(self, browser, services, world, api):
        owner, d = await signed_in_owner(browser, services, world, api)
        long_tag = "x" * 65
        r = await browser.follow(await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/edit",
                                                      {"tags": f"eu, {long_tag}", "notes": "kept"}))
        assert "Not saved: Each tag must be 1 to 64 printable characters" in text_of(r)
        assert f'value="eu, {long_tag}"' in r.body.decode() and ">\nkept</textarea>" in r.body.decode()
        assert (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body["tags"] == []

    @pytest.mark.gen_test
    async def test_notes_too_long_are_refused_in_words(self, browser, services, world, api):
        _, d = await signed_in_owner(browser, services, world, api)
        r = await browser.follow(await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/edit",
                                                      {"tags": "", "notes": "n" * 2001}))
        assert "Must be at most 2000 characters (got 2001)" in text_of(r)


class TestDelete:
    """Deleting a domain: a page that names it, then DELETE /v1/domains/:id."""

    @pytest.mark.gen_test
    async def test_the_confirmation_names_the_hostname_and_what_stops(self, browser, services, world, api):
        _, d = await signed_in_owner(browser, services, world, api)
        assert f'href="/site/{d["id"]}/delete"' in (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        page = text_of(await browser.get(f"/site/{d['id']}/delete"))
        assert "Delete shop.example.com? Its records stop being checked" in page

    @pytest.mark.gen_test
    async def test_confirming_deletes_it_and_says_which(self, browser, services, world, api):
        owner, d = await signed_in_owner(browser, services, world, api)
        page = f"/site/{d['id']}/delete"
        r = await browser.submit(page, page)
        assert (r.code, r.headers["Location"]) == (303, "/domains")
        assert flash_of(await browser.follow(r)).startswith("shop.example.com was deleted")
        assert (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).status == 404

    @pytest.mark.gen_test
    async def test_a_delete_sent_twice_answers_both_times_as_the_first(self, browser, services, world, api):
        _, d = await signed_in_owner(browser, services, world, api)
        page = f"/site/{d['id']}/delete"
        form = await browser.form_on(page, page)
        first, second = await browser.post(page, form), await browser.post(page, form)
        assert [(r.code, r.headers["Location"]) for r in (first, second)] == [(303, "/domains")] * 2
        assert flash_of(await browser.follow(second)).startswith("shop.example.com was deleted")

    @pytest.mark.gen_test
    async def test_a_new_form_for_a_deleted_domain_is_a_not_found_page(self, browser, services, world, api):
        owner, d = await signed_in_owner(browser, services, world, api)
        page = f"/site/{d['id']}/delete"
        form = await browser.form_on(page, page)
        await api.delete(f"/v1/domains/{d['id']}", token=owner.token)
        assert (await browser.post(page, form)).code == 404


class TestHttpsScan:
    """"Test its HTTPS now": POST /v1/site-scan/https for the domain's hostname, in words. The
    hostname points at 127.0.0.1, where the API tests' TLS server answers with test CAs."""

    @pytest.fixture
    def config(self, config, tls, ca_bundle):
        return attrs.evolve(config, site_scan=SiteScanConfig(port=tls.port, timeout_seconds=1),
                            network=NetworkConfig(allow_private_ranges=["127.0.0.0/8"], ca_bundle=ca_bundle))

    @pytest.mark.gen_test
    async def test_a_trusted_certificate_is_reported_with_its_expiry(self, browser, services, world, api, site, cas):
        _, d = await signed_in_owner(browser, services, world, api)
        site("shop.example.com", cas["trusted"].issue_cert("shop.example.com", not_after=dt.datetime(2027, 5, 1, 12, tzinfo=dt.UTC)))
        page = text_of(await browser.get(f"/site/{d['id']}/dns?scan=1"))
        assert "HTTPS works." in page and "It answers HTTPS" in page
        assert "The certificate it presents is valid until 2027-05-01 12:00 UTC." in page

    @pytest.mark.gen_test
    async def test_a_certificate_for_another_name_is_explained(self, browser, services, world, api, site, cas):
        _, d = await signed_in_owner(browser, services, world, api)
        site("shop.example.com", cas["trusted"].issue_cert("other.example.net"))
        page = text_of(await browser.get(f"/site/{d['id']}/dns?scan=1"))
        assert "HTTPS is not working properly. The certificate is for other.example.net, not shop.example.com." in page

    @pytest.mark.gen_test
    async def test_a_refused_certificate_is_not_called_a_secure_connection(self, browser, services, world, api, site, cas):
        _, d = await signed_in_owner(browser, services, world, api)
        site("shop.example.com", cas["trusted"].issue_cert("other.example.net"))
        page = text_of(await browser.get(f"/site/{d['id']}/dns?scan=1"))
        assert "It answers HTTPS, but the connection is not secure: browsers refuse the certificate it presents" in page
        assert "secure connection was made" not in page

    @pytest.mark.gen_test
    async def test_a_name_without_an_address_is_said_in_words(self, browser, services, world, api):
        _, d = await signed_in_owner(browser, services, world, api)
        page = text_of(await browser.get(f"/site/{d['id']}/dns?scan=1"))
        assert "The test could not reach the site. shop.example.com has no public address" in page

    @pytest.mark.gen_test
    async def test_the_providers_certificate_is_recognised(self, browser, services, world, api, clock, site, cas):
        owner, cert = await active_domain(api, world, services, clock)
        not_after = dt.datetime.fromisoformat(cert["notAfter"])
        site("shop.example.com", cas["sandbox"].issue_cert("shop.example.com", not_after=not_after))
        sign_in(browser, services, owner)
        page = text_of(await browser.get(f"/site/{cert['domainId']}/dns?scan=1"))
        assert "It is the certificate our edge provider issued for shop.example.com." in page

    @pytest.mark.gen_test
    async def test_a_read_only_member_may_test_too(self, browser, services, world, api, site, cas):
        owner, d = await signed_in_owner(browser, services, world, api)
        site("shop.example.com", cas["trusted"].issue_cert("shop.example.com"))
        sign_in(browser, services, world.member(owner.workspace, "read_only"))
        page = await browser.get(f"/site/{d['id']}/dns")
        assert f'href="/site/{d["id"]}/dns?scan=1#scan"' in page.body.decode()
        assert "HTTPS works." in text_of(await browser.get(f"/site/{d['id']}/dns?scan=1"))


class TestScanRateLimit:
    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, rate_limits=RateLimitsConfig(site_scan=2))

    @pytest.mark.gen_test
    async def test_the_test_counts_in_the_site_scan_bucket(self, browser, services, world, api):
        _, d = await signed_in_owner(browser, services, world, api)
        codes = [(await browser.get(f"/site/{d['id']}/dns?scan=1")).code for _ in range(3)]
        assert codes == [200, 200, 429]


class TestLinks:
    """"Revoke" and "Remind" per active link on the DNS page."""

    @pytest.fixture
    def config(self, config, smtp):
        return attrs.evolve(config, smtp=SmtpConfig(host=smtp.host, port=smtp.port, starttls=False,
                                                                  timeout_seconds=2))

    async def shared(self, browser, services, world, api, recipient=RECIPIENT):
        owner, d = await signed_in_owner(browser, services, world, api)
        body = {"domainId": d["id"], **({"recipientEmail": recipient} if recipient else {})}
        link = (await api.post("/v1/verification-links", body, token=owner.token)).body
        return owner, d, link

    @pytest.mark.gen_test
    async def test_revoking_a_link_makes_it_say_it_was_revoked(self, browser, services, world, api, http_client, base_url):
        _, d, link = await self.shared(browser, services, world, api)
        r = await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/links/{link['id']}/revoke")
        assert r.code == 303 and "revoked" in flash_of(await browser.follow(r))
        opened = await Browser(http_client, base_url).get(urlsplit(link["url"]).path)
        assert opened.code == 410 and "revoked" in text_of(opened)

    @pytest.mark.gen_test
    async def test_remind_emails_the_link_again_to_its_recipient(self, browser, services, world, api, smtp):
        _, d, link = await self.shared(browser, services, world, api)
        r = await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/links/{link['id']}/remind")
        assert flash_of(await browser.follow(r)) == f"The link was e-mailed again to {RECIPIENT}."
        [message] = smtp.messages
        assert message["To"] == RECIPIENT and link["url"] in message.get_content()

    @pytest.mark.gen_test
    async def test_remind_is_offered_only_for_a_link_with_a_recipient(self, browser, services, world, api):
        _, d, link = await self.shared(browser, services, world, api, recipient=None)
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        assert f"/links/{link['id']}/revoke" in page and f"/links/{link['id']}/remind" not in page

    @pytest.mark.gen_test
    async def test_the_daily_limit_is_said_in_words(self, browser, services, world, api, smtp):
        owner, d, link = await self.shared(browser, services, world, api)
        for _ in range(5):
            other = (await api.post("/v1/verification-links", {"domainId": d["id"], "recipientEmail": RECIPIENT},
                                    token=owner.token)).body
            assert (await api.post(f"/v1/verification-links/{other['id']}/remind", token=owner.token)).status == 200
        r = await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/links/{link['id']}/remind")
        assert flash_of(await browser.follow(r)).startswith(
            f"No reminder was sent: {RECIPIENT} has had 5 reminders in the last 24 hours")
        assert len(smtp.messages) == 5


class TestRotateKey:
    """"Rotate" on /account/keys (POST /v1/api-keys/:id/rotate)."""

    @pytest.mark.gen_test
    async def test_the_new_secret_is_shown_once_and_works_and_the_old_one_stops(self, browser, services, world, api):
        owner = world.owner()
        old = world.key(owner.workspace, ["domains:read"], name="ci")
        listed = (await api.get("/v1/api-keys", token=world.key(owner.workspace, ["*"]))).body
        [key_id] = [key["id"] for key in listed if key["name"] == "ci"]
        sign_in(browser, services, owner)
        page = await browser.follow(await browser.submit(f"{KEYS}/{key_id}/rotate", f"{KEYS}/{key_id}/rotate"))
        new = re.search(r'<code id="new-key">(ac_live_\w+)</code>', page.body.decode()).group(1)
        assert "the old secret stopped working at once" in flash_of(page)
        assert new not in (await browser.get(KEYS)).body.decode()
        assert (await api.post("/v1/domains/query", {}, token=new)).status == 200
        assert (await api.post("/v1/domains/query", {}, token=old)).status == 401


class TestRoles:
    """read_only sees none of these forms and is refused them; operators do not manage keys."""

    @pytest.fixture
    def config(self, config, smtp):
        return attrs.evolve(config, smtp=SmtpConfig(host=smtp.host, port=smtp.port, starttls=False))

    async def reader_and_domain(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        link = (await api.post("/v1/verification-links", {"domainId": d["id"], "recipientEmail": RECIPIENT},
                               token=owner.token)).body
        sign_in(browser, services, world.member(owner.workspace, "read_only"))
        return d, link

    @pytest.mark.gen_test
    async def test_read_only_sees_none_of_the_forms(self, browser, services, world, api):
        d, _ = await self.reader_and_domain(browser, services, world, api)
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        assert "/edit" not in page and "/delete" not in page and "/links/" not in page
        assert (await browser.get(f"/site/{d['id']}/delete")).code == 403
        assert (await browser.get(f"/site/{d['id']}/edit")).code == 403

    @pytest.mark.gen_test
    async def test_read_only_posts_are_refused(self, browser, services, world, api):
        d, link = await self.reader_and_domain(browser, services, world, api)
        for action in ("edit", "delete", f"links/{link['id']}/revoke", f"links/{link['id']}/remind"):
            assert (await browser.post(f"/site/{d['id']}/{action}", {"tags": "x"})).code == 403, action

    @pytest.mark.gen_test
    async def test_an_operator_may_not_rotate_keys(self, browser, services, world, api):
        owner = world.owner()
        key_id = (await api.get("/v1/api-keys", token=world.key(owner.workspace, ["*"]))).body[0]["id"]
        sign_in(browser, services, world.member(owner.workspace, "operator"))
        assert (await browser.post(f"{KEYS}/{key_id}/rotate")).code == 403


class TestOtherWorkspaces:
    """Another workspace's domain, link or key is a 404 page, and stays as it was."""

    @pytest.mark.gen_test
    async def test_another_workspaces_domain_is_not_found(self, browser, services, world, api):
        other = world.owner()
        d = await new_domain(api, other)
        sign_in(browser, services, world.owner())
        for method, action in (("GET", "edit"), ("POST", "edit"), ("GET", "delete"), ("POST", "delete")):
            assert (await browser.request(method, f"/site/{d['id']}/{action}") if method == "GET"
                    else await browser.post(f"/site/{d['id']}/{action}", await browser.tokens())).code == 404, (method, action)
        assert (await api.get(f"/v1/domains/{d['id']}", token=other.token)).status == 200

    @pytest.mark.gen_test
    async def test_another_workspaces_link_is_not_found(self, browser, services, world, api):
        other = world.owner()
        theirs = await new_domain(api, other)
        link = (await api.post("/v1/verification-links", {"domainId": theirs["id"]}, token=other.token)).body
        _, mine = await signed_in_owner(browser, services, world, api)
        assert (await browser.post(f"/site/{mine['id']}/links/{link['id']}/revoke", await browser.tokens())).code == 404
        assert (await api.get(f"/v1/verification-links?domainId={theirs['id']}&status=active",
                              token=other.token)).body["total"] == 1

    @pytest.mark.gen_test
    async def test_another_workspaces_key_is_not_found(self, browser, services, world, api):
        other = world.owner()
        secret = world.key(other.workspace, ["*"])
        key_id = (await api.get("/v1/api-keys", token=secret)).body[0]["id"]
        sign_in(browser, services, world.owner())
        assert (await browser.get(f"{KEYS}/{key_id}/rotate")).code == 404
        assert (await browser.post(f"{KEYS}/{key_id}/rotate", {**await browser.tokens(), "confirmed": "rotate"})).code == 404
        assert (await api.get("/v1/api-keys", token=secret)).status == 200
