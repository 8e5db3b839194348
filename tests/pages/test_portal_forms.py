"""One action per intent: every answer to a portal form is a redirect (a reload repeats nothing),
and a form submitted twice (a double click, the back button and submit again) acts once, both
answers showing what the one action made."""

from __future__ import annotations

import asyncio
import re
from typing import ClassVar

import attrs
import pytest

from core.certificates import idempotency
from tests.pages.portal_client import Browser, hidden_fields, new_domain, sign_in

KEYS = "/account/keys"


def shown_secret(page: bytes) -> str | None:
    found = re.search(r'<code id="new-key">(ac_live_\w+)</code>', page.decode())
    return found.group(1) if found else None


class TestPostRedirectGet:
    @pytest.mark.gen_test
    async def test_creating_a_key_answers_with_a_redirect_to_the_keys_page(self, browser, services, world):
        sign_in(browser, services, world.owner())
        r = await browser.submit(KEYS, KEYS, {"name": "ci", "scopes": ["domains:read"]})
        assert (r.code, r.headers["Location"]) == (303, KEYS)

    @pytest.mark.gen_test
    async def test_the_new_key_is_shown_on_the_page_the_form_leads_to(self, browser, services, world):
        sign_in(browser, services, world.owner())
        page = await browser.follow(await browser.submit(KEYS, KEYS, {"name": "ci", "scopes": ["domains:read"]}))
        assert shown_secret(page.body) is not None

    @pytest.mark.gen_test
    async def test_reloading_that_page_does_not_show_the_secret_again(self, browser, services, world):
        sign_in(browser, services, world.owner())
        first = await browser.follow(await browser.submit(KEYS, KEYS, {"name": "ci", "scopes": ["domains:read"]}))
        secret = shown_secret(first.body)
        again = (await browser.get(KEYS)).body.decode()
        assert secret[:16] in again and secret not in again

    @pytest.mark.gen_test
    async def test_the_secret_is_not_kept_in_clear_in_the_cookie(self, browser, services, world):
        sign_in(browser, services, world.owner())
        await browser.submit(KEYS, KEYS, {"name": "ci", "scopes": ["domains:read"]})
        secret = shown_secret((await browser.get(KEYS)).body)
        assert browser.cookies.get("cps_reveal") is None  # read once, cleared
        assert secret not in str(services.store.db.execute("SELECT response FROM idempotency_keys").fetchall())


class TestOneActionPerIntent:
    @pytest.mark.gen_test
    async def test_a_key_form_sent_twice_creates_one_key(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        form = {**await browser.form_on(KEYS, KEYS), "name": "ci", "scopes": ["domains:read"]}
        await browser.post(KEYS, form)
        await browser.post(KEYS, form)
        names = [k["name"] for k in (await api.get("/v1/api-keys", token=owner.token)).body]
        assert names.count("ci") == 1

    @pytest.mark.gen_test
    async def test_the_second_answer_shows_the_secret_the_first_made(self, browser, services, world):
        sign_in(browser, services, world.owner())
        form = {**await browser.form_on(KEYS, KEYS), "name": "ci", "scopes": ["domains:read"]}
        await browser.post(KEYS, form)  # its answer lost, as when a second click replaces the first
        browser.cookies.pop("cps_reveal", None)
        second = await browser.follow(await browser.post(KEYS, form))
        assert shown_secret(second.body) is not None

    @pytest.mark.gen_test
    async def test_after_ten_minutes_a_resubmission_no_longer_shows_the_secret(self, browser, services, world, clock):
        sign_in(browser, services, world.owner())
        form = {**await browser.form_on(KEYS, KEYS), "name": "ci", "scopes": ["domains:read"]}
        await browser.follow(await browser.post(KEYS, form))
        clock.advance(11 * 60)
        idempotency.purge(services)
        page = await browser.follow(await browser.post(KEYS, form))
        assert shown_secret(page.body) is None and "the secret was shown the first time" in page.body.decode()

    @pytest.mark.gen_test
    async def test_the_purge_drops_form_secrets_after_ten_minutes(self, browser, services, world, clock):
        sign_in(browser, services, world.owner())
        await browser.submit(KEYS, KEYS, {"name": "ci", "scopes": ["domains:read"]})
        clock.advance(11 * 60)
        idempotency.purge(services)
        responses = services.store.db.execute("SELECT response FROM idempotency_keys WHERE method = 'FORM'").fetchall()
        assert responses and all('"secret"' not in r[0] for r in responses)

    @pytest.mark.gen_test
    async def test_two_clicks_at_once_on_create_a_link_make_one_link(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page, action = f"/site/{d['id']}/dns", f"/site/{d['id']}/dns/share"
        form = await browser.form_on(page, action)
        answers = await asyncio.gather(browser.post(action, form), browser.post(action, form))
        links = (await api.get(f"/v1/verification-links?domainId={d['id']}", token=owner.token)).body
        assert [a.code for a in answers] == [303, 303] and links["total"] == 1

    @pytest.mark.gen_test
    async def test_adding_a_domain_twice_from_one_form_adds_it_once_and_leads_to_its_page(self, browser, services, world):
        sign_in(browser, services, world.owner())
        form = {**await browser.form_on("/domains", "/domains"), "hostnames": "new.example.com"}
        first, second = await browser.post("/domains", form), await browser.post("/domains", form)
        assert first.headers["Location"] == second.headers["Location"]

    @pytest.mark.gen_test
    async def test_the_same_form_sent_again_with_other_values_acts_again(self, browser, services, world):
        sign_in(browser, services, world.owner())
        form = await browser.form_on("/domains", "/domains")
        first = await browser.post("/domains", {**form, "hostnames": "one.example.com"})
        second = await browser.post("/domains", {**form, "hostnames": "two.example.com"})
        assert first.headers["Location"] != second.headers["Location"]

    @pytest.mark.gen_test
    async def test_a_new_form_acts_again(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        for _ in range(2):
            await browser.submit(KEYS, KEYS, {"name": "ci", "scopes": ["domains:read"]})
        names = [k["name"] for k in (await api.get("/v1/api-keys", token=owner.token)).body]
        assert names.count("ci") == 2

    @pytest.mark.gen_test
    async def test_a_refused_form_can_be_corrected_and_sent_again(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        form = await browser.form_on("/domains", "/domains")
        refused = await browser.post("/domains", {**form, "hostnames": "localhost"})
        accepted = await browser.post("/domains", {**form, "hostnames": "fine.example.com"})
        assert refused.headers["Location"] == "/domains" and accepted.headers["Location"].startswith("/site/")


class TestStaleForms:
    @pytest.mark.gen_test
    async def test_a_form_rendered_for_another_person_is_refused(self, http_client, base_url, services, world):
        mine, theirs = Browser(http_client, base_url), Browser(http_client, base_url)
        sign_in(mine, services, world.owner())
        sign_in(theirs, services, world.owner())
        form = await mine.form_on(KEYS, KEYS)
        await theirs.get("/")
        r = await theirs.post(KEYS, {**form, "_xsrf": theirs.cookies["_xsrf"], "name": "x", "scopes": ["domains:read"]})
        assert r.code == 400 and "reload the page" in r.body.decode()

    @pytest.mark.gen_test
    async def test_a_form_older_than_a_day_is_refused(self, browser, services, world, clock):
        owner = world.owner()
        sign_in(browser, services, owner)
        form = await browser.form_on(KEYS, KEYS)
        clock.advance(25 * 3600)
        sign_in(browser, services, attrs.evolve(owner, token=world.session_token(owner.user.email)))  # signed in again
        r = await browser.post(KEYS, {**form, "name": "x", "scopes": ["domains:read"]})
        assert r.code == 400 and "more than a day old" in r.body.decode()


    @pytest.mark.gen_test
    async def test_a_form_shown_for_one_workspace_does_not_act_in_another(self, browser, services, world, api):
        mine, theirs = world.owner(name="Mine"), world.owner(name="Theirs")
        member = world.member(theirs.workspace, "owner", email=mine.user.email)
        sign_in(browser, services, member)
        form = await browser.form_on(KEYS, KEYS)  # shown for the first workspace joined, Mine
        await browser.post("/account/switch", {"workspace": str(theirs.workspace.id), "next": "/domains"})
        r = await browser.post(KEYS, {**form, "name": "meant for Mine", "scopes": ["domains:read"]})
        names = [k["name"] for k in (await api.get("/v1/api-keys", token=theirs.token)).body]
        assert r.code == 400 and 'id="other-workspace"' in r.body.decode() and "meant for Mine" not in names

    @pytest.mark.gen_test
    async def test_a_form_without_its_token_is_refused_as_one_with_a_wrong_token_is(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        form = await browser.form_on(KEYS, KEYS)
        wrong = await browser.post(KEYS, {**form, "intent": "not-a-token", "name": "wrong", "scopes": ["domains:read"]})
        del form["intent"]
        missing = await browser.post(KEYS, {**form, "name": "missing", "scopes": ["domains:read"]})
        names = [k["name"] for k in (await api.get("/v1/api-keys", token=owner.token)).body]
        assert [r.code for r in (wrong, missing)] == [400, 400] and names == []
        assert all("more than a day old" in r.body.decode() for r in (wrong, missing))

    @pytest.mark.gen_test
    async def test_a_form_without_its_token_does_not_act_in_another_workspace(self, browser, services, world, api):
        mine, theirs = world.owner(name="Mine"), world.owner(name="Theirs")
        member = world.member(theirs.workspace, "owner", email=mine.user.email)
        sign_in(browser, services, member)
        form = await browser.form_on(KEYS, KEYS)  # shown for Mine; sent without its token
        del form["intent"]
        await browser.post("/account/switch", {"workspace": str(theirs.workspace.id), "next": "/domains"})
        r = await browser.post(KEYS, {**form, "name": "meant for Mine", "scopes": ["domains:read"]})
        names = [k["name"] for k in (await api.get("/v1/api-keys", token=theirs.token)).body]
        assert r.code == 400 and "meant for Mine" not in names


class TestSigningOutAndSigningUp:
    @pytest.mark.gen_test
    async def test_signing_out_clears_what_the_browser_holds_about_the_person(self, browser, services, world):
        sign_in(browser, services, world.owner())
        await browser.submit(KEYS, KEYS, {"name": "ci", "scopes": ["domains:read"]})  # a flash and a secret pending
        await browser.post("/logout")
        assert not {"cps_session", "cps_flash", "cps_reveal"} & set(browser.cookies)

    @pytest.mark.gen_test
    async def test_the_sign_up_answer_is_shown_again_on_a_reload(self, browser):
        await browser.follow(await browser.post("/signup", {"email": "new@example.com", "domain": "shop.example.com"}))
        again = await browser.get("/signup/done")
        assert again.code == 200 and b"Welcome, new@example.com" in again.body

    @pytest.mark.gen_test
    async def test_the_sign_up_answer_is_gone_once_signed_out(self, browser):
        await browser.follow(await browser.post("/signup", {"email": "new@example.com", "domain": "shop.example.com"}))
        await browser.post("/logout")
        assert b"new@example.com" not in (await browser.get("/signup/done")).body

    @pytest.mark.gen_test
    async def test_switching_on_a_page_the_new_role_may_not_open_leads_to_the_domains(self, browser, services, world):
        mine, theirs = world.owner(name="Mine"), world.owner(name="Theirs")
        member = world.member(theirs.workspace, "read_only", email=mine.user.email)
        sign_in(browser, services, member)
        r = await browser.post("/account/switch", {"workspace": str(theirs.workspace.id), "next": "/team"})
        assert r.headers["Location"] == "/domains"


class TestKeysWithoutScopes:
    @pytest.mark.gen_test
    async def test_a_key_without_scopes_is_warned_about_and_not_created(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        r = await browser.follow(await browser.submit(KEYS, KEYS, {"name": "empty"}))
        names = [k["name"] for k in (await api.get("/v1/api-keys", token=owner.token)).body]
        assert "would have no scopes" in r.body.decode() and "empty" not in names

    @pytest.mark.gen_test
    async def test_creating_it_anyway_makes_the_key(self, browser, services, world, api):
        owner = world.owner()
        sign_in(browser, services, owner)
        warning = await browser.follow(await browser.submit(KEYS, KEYS, {"name": "empty"}))
        fields = hidden_fields(warning.body.decode(), KEYS)
        assert fields["noScopes"] == "yes"
        await browser.post(KEYS, fields)
        keys = (await api.get("/v1/api-keys", token=owner.token)).body
        assert [k["scopes"] for k in keys if k["name"] == "empty"] == [[]]


class TestEveryAction:
    """Every portal form's handler, found from the routes: counted in the rate-limit bucket of the
    API call it stands for, and answered through ``act`` (one action per intent, then a 303)."""

    EXEMPT: ClassVar[dict[str, str]] = {
        "LogoutHandler": "signing out changes only this browser",
        "SignupPageHandler": "signed out: no one to bind a form token to; counted in the signup bucket",
        "SwitchWorkspace": "changes only what this browser shows",
        "PublicLinkPage": "a DNS administrator without an account; counted in the public links bucket",
        "AuthorizeHandler": "the built-in development identity provider, not the portal",
        "OneClickStart": "each click is a new one-use start at the DNS host, nothing a second click repeats",
        "PublicOneClickStart": "the same, for a verification link's holder; counted in the public links bucket",
        "OneClickReturn": "checks the set-up this browser started, once (its state is used up); perhaps signed out",
    }

    @staticmethod
    def portal_posts():
        import inspect

        from tornado.web import RequestHandler

        import handlers

        for route in handlers.routes:
            handler = route[1]
            if handler.post is RequestHandler.post or not handler.__module__.startswith(
                    ("handlers.portal.base", "handlers.portal.pages", "handlers.portal.account", "handlers.portal.signin",
                     "handlers.portal.domains", "handlers.portal.keys", "handlers.portal.live")):
                continue
            yield handler.__name__, inspect.getsource(handler.post)

    def test_every_portal_action_counts_in_a_rate_limit_bucket(self):
        uncounted = [name for name, source in self.portal_posts()
                     if "hit_rate_limit(" not in source and name not in ("LogoutHandler", "SwitchWorkspace", "PublicLinkPage")]
        assert uncounted == []

    def test_every_portal_action_answers_through_act(self):
        direct = [name for name, source in self.portal_posts() if not re.search(r"self\.act(_\w+)?\(", source) and name not in self.EXEMPT]
        assert direct == []
