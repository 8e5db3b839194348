"""What the background checks (core/lifecycle/) say on the two pages where a person looks at a
domain's DNS: the portal's DNS page and the page a verification link opens. When the next check
is, that checks stopped, nothing when they are switched off, and a verified domain's drift with
its exact fix. Fields the watcher sets are written straight to the store."""

from __future__ import annotations

import datetime as dt
import uuid
from urllib.parse import urlsplit

import attrs
import pytest
from markupsafe import escape

from store.records import DriftProblem
from tests.helpers import mark_verified
from tests.pages.portal_client import Browser, new_domain, sign_in

NEXT_CHECK = dt.datetime(2026, 11, 22, 10, 5, 30, tzinfo=dt.UTC)
DRIFT_SINCE = dt.datetime(2026, 11, 21, 8, 15, tzinfo=dt.UTC)
NEXT_CHECK_SHOWN = '<time datetime="2026-11-22T10:05:30Z">2026-11-22 10:05:30 UTC</time>'


def change(services, domain: dict, **fields) -> None:
    """Set fields of the stored domain, as the lifecycle watcher would."""
    store = services.store
    row = store.domains.get(uuid.UUID(domain["orgId"]), uuid.UUID(domain["id"]))
    with store.transaction():
        store.domains.update(attrs.evolve(row, **fields))


async def link_path(api, owner, domain: dict) -> str:
    url = (await api.post("/v1/verification-links", {"domainId": domain["id"]}, token=owner.token)).body["url"]
    return urlsplit(url).path


async def both_pages(browser, services, world, api, **fields) -> tuple[str, str]:
    """The DNS page (signed in as the owner) and the link page (as a stranger) of a new domain."""
    owner = world.owner()
    d = await new_domain(api, owner)
    if fields.pop("verified", False):
        mark_verified(services, d)
    change(services, d, **fields)
    path = await link_path(api, owner, d)
    stranger = Browser(browser.client, browser.base)
    sign_in(browser, services, owner)
    dns_page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
    link_page = (await stranger.get(path)).body.decode()
    return dns_page, link_page


def drifted(message: str) -> dict:
    problem = DriftProblem(
        "delegation_wrong", message,
        "Set the CNAME at _acme-challenge.shop.example.com to shop-example-com.dcv.edge-provider.example again.",
    )
    return {"verified": True, "drift": (problem,), "drift_since": DRIFT_SINCE, "ops_status": "action_needed"}


class TestAutomaticChecks:
    @pytest.mark.gen_test
    async def test_before_the_first_check_both_pages_say_when_it_is(self, browser, services, world, api):
        for page in await both_pages(browser, services, world, api, next_check_at=NEXT_CHECK):
            assert (f'<p id="not-checked">Not checked yet; first check at {NEXT_CHECK_SHOWN}.\nPublish both records: '
                    "that check looks for them") in page
            assert 'id="next-check"' not in page

    @pytest.mark.gen_test
    async def test_before_the_first_check_the_badge_says_not_checked_yet_not_needs_action(self, browser, services, world, api):
        for page in await both_pages(browser, services, world, api, next_check_at=NEXT_CHECK):
            assert '<span class="badge pending" id="ops-status">not checked yet</span>' in page
            assert "needs action" not in page

    @pytest.mark.gen_test
    async def test_after_a_check_both_pages_say_when_the_next_is(self, browser, services, world, api):
        checked = await both_pages(browser, services, world, api, next_check_at=NEXT_CHECK, validation_checked_at=DRIFT_SINCE)
        for page in checked:
            assert f'<p id="next-check">Checked automatically; next check at {NEXT_CHECK_SHOWN}.</p>' in page
            assert "Last checked 2026-11-21 08:15:00 UTC." in page

    @pytest.mark.gen_test
    async def test_stopped_checks_say_so_and_ask_for_check_now_after_publishing(self, browser, services, world, api):
        pages = await both_pages(browser, services, world, api, next_check_at=None)
        for page in pages:
            assert "Automatic checks have stopped: the records were not found in 14 days of checking." in page
            assert "After publishing both records, press <strong>Check now</strong>" in page
            assert "Checked automatically" not in page and 'id="check-now"' in page

    @pytest.mark.gen_test
    async def test_a_read_only_member_is_told_someone_else_must_check_now(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        change(services, d, next_check_at=None)
        sign_in(browser, services, world.member(owner.workspace, "read_only"))
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        assert "Automatic checks have stopped" in page and 'id="check-now"' not in page
        assert "someone who may check this domain needs to press <strong>Check now</strong>" in page

    @pytest.mark.gen_test
    async def test_a_verified_domain_no_longer_scheduled_says_nothing_of_stopped_checks(self, browser, services, world, api):
        for page in await both_pages(browser, services, world, api, verified=True, next_check_at=None):
            assert 'id="next-check"' not in page and "Automatic checks" not in page


class TestLifecycleDisabled:
    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, lifecycle=attrs.evolve(config.lifecycle, enabled=False))

    @pytest.mark.gen_test
    async def test_nothing_is_said_about_automatic_checks_when_lifecycle_is_disabled(self, browser, services, world, api):
        scheduled = await both_pages(browser, services, world, api, next_check_at=NEXT_CHECK)
        stopped = await both_pages(Browser(browser.client, browser.base), services, world, api, next_check_at=None)
        for page in (*scheduled, *stopped):
            assert 'id="next-check"' not in page
            assert "automatically" not in page and "Automatic checks" not in page


class TestDrift:
    @pytest.mark.gen_test
    async def test_drift_is_shown_with_its_exact_fix_and_since_when_on_both_pages(self, browser, services, world, api):
        message = "The CNAME at _acme-challenge.shop.example.com points to old.example.net."
        for page in await both_pages(browser, services, world, api, **drifted(message)):
            assert '<strong id="validation-status">verified</strong>' in page
            assert 'class="badge action_needed"' in page
            assert ('<p class="error" role="alert" id="drift-summary"><strong>shop.example.com is verified, but its next '
                    "certificate renewal will fail until this is fixed.</strong>") in page
            assert "Checks have found this since 2026-11-21 08:15 UTC:" in page
            assert f"<dt>Problem</dt><dd>{message} <small>(<code>delegation_wrong</code>)</small></dd>" in page
            # In the records' own dl/dd, which breaks long names on narrow screens.
            assert '<li class="record finding error" id="drift-1">' in page
            assert ('<dt>Exact fix</dt><dd id="drift-1-fix">Set the CNAME at _acme-challenge.shop.example.com to '
                    "shop-example-com.dcv.edge-provider.example again.</dd>") in page

    @pytest.mark.gen_test
    async def test_no_drift_notice_without_drift(self, browser, services, world, api):
        for page in await both_pages(browser, services, world, api, verified=True):
            assert 'id="drift"' not in page and "next certificate renewal will fail" not in page

    @pytest.mark.gen_test
    async def test_a_drift_message_is_escaped(self, browser, services, world, api):
        message = '<script>alert("drift")</script> & more'
        for page in await both_pages(browser, services, world, api, **drifted(message)):
            assert "<script>alert" not in page
            assert "&lt;script&gt;alert(&#34;drift&#34;)&lt;/script&gt; &amp; more" == escape(message)
            assert str(escape(message)) in page
