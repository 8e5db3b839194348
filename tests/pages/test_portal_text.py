"""What a person types reaches the core's rules as typed (issue 45, item 5): the portal refuses what
the API refuses, in words, and never trims or cleans it first, as Tornado's ``get_argument`` does
(it strips NBSP, U+0085, U+2028 and U+3000 from the ends and turns control characters into
spaces). E-mail addresses typed into the portal's forms follow the API's one rule (item 2)."""

from __future__ import annotations

import html
import re
from urllib.parse import quote

import pytest

from core.text import EMAIL_MESSAGE
from tests.helpers import UNPRINTABLE_EMAILS
from tests.pages.portal_client import new_domain, sign_in

#: Text a search or a tag may not hold, each of which the portal cleaned into text it took: white
#: space Tornado strips from the ends, and a control character inside, which it made a space.
REFUSED_TEXT = ["abc\u00a0", "abc\u0085", "\u2028abc", "abc\u3000", "a\u0001bc"]


def text_of(page) -> str:
    """The page's words, tags dropped and entities read, as a person reads them."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.body.decode())))


async def api_refusal(api, owner, body, field):
    """What the API says of ``body`` sent to POST /v1/domains/query: the portal must say the same."""
    r = await api.post("/v1/domains/query", body, token=owner.token)
    assert (r.status, r.code) == (400, "validation_error"), r.body
    return r.body["details"]["fieldErrors"][field][0]


class TestDomainFilters:
    """``/domains`` and ``/domains/status``: the search ``q`` and the ``tag`` filter."""

    @pytest.mark.gen_test
    @pytest.mark.parametrize("q", REFUSED_TEXT)
    async def test_a_search_the_api_refuses_is_refused_with_its_words(self, browser, services, world, api, q):
        owner = world.owner()
        await new_domain(api, owner, "abc.example.com")
        sign_in(browser, services, owner)
        page = await browser.get(f"/domains?q={quote(q)}")
        assert page.code == 400 and await api_refusal(api, owner, {"q": q}, "q") in text_of(page)
        assert "abc.example.com" not in text_of(page)

    @pytest.mark.gen_test
    @pytest.mark.parametrize("tag", REFUSED_TEXT)
    async def test_a_tag_filter_the_api_refuses_is_refused_with_its_words(self, browser, services, world, api, tag):
        owner = world.owner()
        await api.post("/v1/domains", {"apex": "abc.example.com", "tags": ["abc"]}, token=owner.token)
        sign_in(browser, services, owner)
        page = await browser.get(f"/domains?tag={quote(tag)}")
        assert page.code == 400 and await api_refusal(api, owner, {"tags": [tag]}, "tags") in text_of(page)

    @pytest.mark.gen_test
    @pytest.mark.parametrize("field", ["q", "tag"])
    async def test_the_rows_the_page_polls_are_refused_too(self, browser, services, world, api, field):
        owner = world.owner()
        sign_in(browser, services, owner)
        assert (await browser.get(f"/domains/status?{field}=abc%C2%A0")).code == 400

    @pytest.mark.gen_test
    async def test_spaces_around_a_search_are_trimmed_as_the_api_trims_them(self, browser, services, world, api):
        owner = world.owner()
        await new_domain(api, owner, "abc.example.com")
        sign_in(browser, services, owner)
        page = await browser.get("/domains?q=%20abc%20")
        assert page.code == 200 and "abc.example.com" in text_of(page)


class TestDomainEdit:
    @pytest.mark.gen_test
    @pytest.mark.parametrize("tag", REFUSED_TEXT)
    async def test_a_tag_the_api_refuses_is_not_saved(self, browser, services, world, api, tag):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        r = await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/edit", {"tags": f"eu, {tag}", "notes": ""})
        assert (r.code, r.headers["Location"]) == (303, f"/site/{d['id']}/edit")
        assert "Not saved: Each tag must be 1 to 64 printable characters" in text_of(await browser.follow(r))
        assert (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body["tags"] == []

    @pytest.mark.gen_test
    async def test_notes_are_kept_as_typed(self, browser, services, world, api):
        """As the API keeps them: spaces and tabs at the ends too (only CRLF becomes LF)."""
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/edit", {"tags": "", "notes": "\tfirst\r\nsecond "})
        assert (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body["notes"] == "\tfirst\nsecond "


class TestEmailForms:
    """Every portal form that takes an e-mail address refuses what the API refuses."""

    @pytest.mark.gen_test
    @pytest.mark.parametrize("email", UNPRINTABLE_EMAILS)
    async def test_sign_up_refuses_the_address_and_makes_no_account(self, browser, services, email):
        r = await browser.post("/signup", {"email": email, "domain": "shop.example.com"})
        assert (r.code, r.headers["Location"]) == (303, "/signup")
        assert EMAIL_MESSAGE in text_of(await browser.follow(r))
        assert services.store.accounts.workspaces_with_owners() == []

    @pytest.mark.gen_test
    @pytest.mark.parametrize("email", UNPRINTABLE_EMAILS)
    async def test_an_invitation_refuses_the_address(self, browser, services, world, email):
        owner = world.owner()
        sign_in(browser, services, owner)
        r = await browser.submit("/team", "/team/invitations", {"email": email, "role": "operator"})
        assert (r.code, r.headers["Location"]) == (303, "/team")
        assert EMAIL_MESSAGE in text_of(await browser.follow(r))
        assert services.store.team.invitations(owner.workspace.id) == []

    @pytest.mark.gen_test
    @pytest.mark.parametrize("email", UNPRINTABLE_EMAILS)
    async def test_a_verification_link_refuses_the_recipient(self, browser, services, world, api, email):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        r = await browser.submit(f"/site/{d['id']}/dns", f"/site/{d['id']}/dns/share", {"recipientEmail": email})
        assert f"No link was created: {EMAIL_MESSAGE}" in text_of(await browser.follow(r))
        assert (await api.get(f"/v1/verification-links?domainId={d['id']}", token=owner.token)).body["items"] == []
