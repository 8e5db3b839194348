"""The webhooks pages as a browser without JavaScript uses them: the list and the add form, an
endpoint's page (secret shown once, edit, disable, rotate, delete), its delivery log, redelivery.

Deliveries go to the real HTTPS receiver of tests/servers/https.py, reached by a DNS name the test
DNS server answers with 127.0.0.1 (as in tests/api/test_webhooks.py); the worker runs when told."""

from __future__ import annotations

import html
import random
import re
import socket
import uuid
from pathlib import Path

import attrs
import pytest

from core.config import NetworkConfig, RateLimitsConfig, WebhooksConfig
from core.webhooks.worker import WebhookWorker
from tests.api import test_webhooks as webhook_fixtures
from tests.helpers import mark_verified
from tests.pages.portal_client import new_domain, sign_in

WEBHOOKS_PAGE = Path(__file__).resolve().parent.parent.parent / "docs" / "webhooks.md"
LIST = "/webhooks"


receiver, hook = webhook_fixtures.receiver, webhook_fixtures.hook  # the API tests' HTTPS receiver


@pytest.fixture
def config(config, receiver):
    network = NetworkConfig(allow_private_ranges=["127.0.0.0/8"], ca_bundle=receiver.ca_pem_path)
    return attrs.evolve(config, network=network, webhooks=WebhooksConfig(request_timeout_seconds=2))


@pytest.fixture
def worker(services):
    return WebhookWorker(services, rng=random.Random(7))


@pytest.fixture
def owner(browser, services, world):
    """A workspace owner, signed in to the browser."""
    actor = world.owner()
    sign_in(browser, services, actor)
    return actor


def readme_snippet() -> str:
    text = WEBHOOKS_PAGE.read_text()
    section = text[text.index("## Verifying a delivery"):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def readme_verifier():
    namespace: dict = {}
    exec(compile(readme_snippet(), "docs/webhooks.md", "exec"), namespace)  # noqa: S102 -- the docs' own code
    return namespace["verify_webhook"]


def shown_secret(page) -> str | None:
    found = re.search(r'<code class="value" id="new-secret">(whsec_[\w-]+)</code>', page.body.decode())
    return found.group(1) if found else None


def text_of(page) -> str:
    """The page's words, tags dropped and entities read, as a person reads them."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page.body.decode())))


async def register(api, owner, url, **fields):
    r = await api.post("/v1/webhooks", {"url": url, **fields}, token=owner.token)
    assert r.status == 201, r.body
    return r.body


async def issue_certificate(api, services, owner, apex="shop.example.com"):
    """A new issuance request, which queues one cert.issue_pending event."""
    d = await new_domain(api, owner, apex)
    mark_verified(services, d)
    await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)


async def add_endpoint(browser, url, events=("*",)):
    """The add form filled in and sent: the redirect answer."""
    return await browser.submit(LIST, LIST, {"url": url, "events": list(events)})


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestList:
    @pytest.mark.gen_test
    async def test_the_list_shows_the_workspaces_endpoints_in_words(self, browser, owner, api, hook):
        created = await register(api, owner, hook.url(), events=["cert.issued"])
        page = await browser.get(LIST)
        words = text_of(page)
        assert page.code == 200 and hook.url() in words and "cert.issued" in words and "enabled" in words
        assert f'href="/webhooks/{created["id"]}"' in page.body.decode()

    @pytest.mark.gen_test
    async def test_the_add_form_offers_each_event_the_service_emits(self, browser, owner):
        page = (await browser.get(LIST)).body.decode()
        for name in ("*", "cert.issued", "cert.issue_pending", "cert.issue_failed"):
            assert f'name="events" value="{name}"' in page


class TestWhichEventsAreSent:
    """Said plainly, on the page and in the docs: by default (the spec's) a certificate that turns
    active after its issuance request sends no ``cert.issued``."""

    LATER = "A certificate that turns active later, found by a refresh or a background check, sends no cert.issued"

    @pytest.mark.gen_test
    async def test_the_page_says_a_certificate_active_later_sends_no_cert_issued(self, browser, owner):
        words = text_of(await browser.get(LIST))
        assert self.LATER in words
        assert "only when the certificate is already active at the request itself" in words

    def test_the_docs_say_it_too(self):
        section = WEBHOOKS_PAGE.read_text()
        assert "a certificate that turns active later sends no `cert.issued`" in section
        assert "only when the provider is active at the issuance itself" in section



class TestWhichEventsAreSentInTransitionsMode:
    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, lifecycle=attrs.evolve(config.lifecycle, events="transitions"))

    @pytest.mark.gen_test
    async def test_the_page_says_later_changes_and_drift_are_sent(self, browser, owner):
        words = text_of(await browser.get(LIST))
        assert TestWhichEventsAreSent.LATER not in words
        assert "also when a later refresh or background check first finds the certificate active" in words
        assert "domain.drift_detected when a check first finds the DNS a renewal needs wrong" in words

    @pytest.mark.gen_test
    async def test_the_add_form_offers_the_drift_events(self, browser, owner):
        page = (await browser.get(LIST)).body.decode()
        for name in ("domain.drift_detected", "domain.drift_cleared"):
            assert f'name="events" value="{name}"' in page


class TestAdding:
    @pytest.mark.gen_test
    async def test_adding_leads_to_the_endpoints_page_showing_its_secret(self, browser, owner, hook):
        r = await add_endpoint(browser, hook.url())
        assert r.code == 303 and re.fullmatch(r"/webhooks/[0-9a-f-]{36}", r.headers["Location"])
        assert re.fullmatch(r"whsec_[\w-]{43}", shown_secret(await browser.follow(r)))

    @pytest.mark.gen_test
    async def test_reloading_the_page_does_not_show_the_secret_again(self, browser, owner, hook):
        r = await add_endpoint(browser, hook.url())
        secret = shown_secret(await browser.follow(r))
        again = await browser.get(r.headers["Location"])
        assert again.code == 200 and shown_secret(again) is None and secret not in again.body.decode()

    @pytest.mark.gen_test
    async def test_the_secret_shown_verifies_a_delivery_with_the_readmes_code(self, browser, owner, services, api, hook,
                                                                             worker, clock):
        secret = shown_secret(await browser.follow(await add_endpoint(browser, hook.url())))
        await issue_certificate(api, services, owner)
        await worker.tick()
        [got] = hook.received
        event = readme_verifier()(secret, got.headers, got.body, now=clock.now().timestamp())
        assert event["type"] == "cert.issue_pending"

    @pytest.mark.gen_test
    async def test_the_page_shows_the_readmes_verification_code(self, browser, owner, hook):
        page = (await browser.follow(await add_endpoint(browser, hook.url()))).body.decode()
        shown = re.search(r'<code id="verify-snippet">(.*?)</code>', page, re.DOTALL).group(1)
        assert html.unescape(shown).strip() == readme_snippet().strip()

    @pytest.mark.gen_test
    async def test_a_form_sent_twice_adds_one_endpoint_and_both_answers_lead_to_its_page(self, browser, owner, api,
                                                                                        hook):
        form = {**await browser.form_on(LIST, LIST), "url": hook.url(), "events": ["*"]}
        first = await browser.post(LIST, form)
        second = await browser.post(LIST, form)
        assert len((await api.get("/v1/webhooks", token=owner.token)).body) == 1
        assert first.code == second.code == 303 and first.headers["Location"] == second.headers["Location"]

    @pytest.mark.gen_test
    async def test_a_url_that_is_not_https_is_refused_in_words_on_the_form(self, browser, owner, api):
        r = await browser.follow(await add_endpoint(browser, "http://hooks.receiver-test.com/hook"))
        assert "The URL must use https." in text_of(r)
        assert 'value="http://hooks.receiver-test.com/hook"' in r.body.decode()  # kept for fixing
        assert (await api.get("/v1/webhooks", token=owner.token)).body == []

    @pytest.mark.gen_test
    async def test_a_name_resolving_to_a_private_address_is_refused_in_words(self, browser, owner, dns):
        dns.publish("internal.corp-test.com", "A", "10.0.0.5")
        r = await browser.follow(await add_endpoint(browser, "https://internal.corp-test.com/hook"))
        assert "non-public" in text_of(r)

    @pytest.mark.gen_test
    async def test_no_event_ticked_is_refused_in_words(self, browser, owner, api, hook):
        r = await browser.follow(await add_endpoint(browser, hook.url(), events=()))
        assert "Choose at least one event" in text_of(r) and 'value="*" checked' not in r.body.decode()
        assert (await api.get("/v1/webhooks", token=owner.token)).body == []


class TestChanging:
    @pytest.mark.gen_test
    async def test_editing_changes_the_events(self, browser, owner, api, hook):
        created = await register(api, owner, hook.url())
        page = f"/webhooks/{created['id']}"
        r = await browser.submit(page, page, {"url": hook.url(), "events": ["cert.issued", "cert.issue_failed"]})
        assert (r.code, r.headers["Location"]) == (303, page)
        [listed] = (await api.get("/v1/webhooks", token=owner.token)).body
        assert listed["events"] == ["cert.issued", "cert.issue_failed"]

    @pytest.mark.gen_test
    async def test_editing_to_a_refused_url_says_why_and_changes_nothing(self, browser, owner, api, hook):
        created = await register(api, owner, hook.url())
        page = f"/webhooks/{created['id']}"
        r = await browser.submit(page, page, {"url": "https://localhost/hook", "events": ["*"]})
        assert (r.code, r.headers["Location"]) == (303, page)
        assert "localhost" in text_of(await browser.follow(r))
        assert (await api.get("/v1/webhooks", token=owner.token)).body[0]["url"] == hook.url()

    @pytest.mark.gen_test
    async def test_changing_only_the_events_does_not_check_the_url_again(self, browser, owner, api, hook, dns):
        created = await register(api, owner, hook.url())
        dns.remove(hook.hostname)
        dns.publish(hook.hostname, "A", "10.1.2.3")  # its deliveries will say so; the events can still change
        page = f"/webhooks/{created['id']}"
        r = await browser.submit(page, page, {"url": hook.url(), "events": ["cert.issued"]})
        assert r.code == 303 and (await api.get("/v1/webhooks", token=owner.token)).body[0]["events"] == ["cert.issued"]

    @pytest.mark.gen_test
    async def test_disable_then_enable(self, browser, owner, api, hook):
        created = await register(api, owner, hook.url())
        page = f"/webhooks/{created['id']}"
        disabled = await browser.follow(await browser.submit(page, f"{page}/disable"))
        assert 'id="endpoint-status">disabled<' in disabled.body.decode()
        assert (await api.get("/v1/webhooks", token=owner.token)).body[0]["status"] == "disabled"
        enabled = await browser.follow(await browser.submit(page, f"{page}/enable"))
        assert 'id="endpoint-status">enabled<' in enabled.body.decode()
        assert (await api.get("/v1/webhooks", token=owner.token)).body[0]["status"] == "active"

    @pytest.mark.gen_test
    async def test_delete_first_asks_naming_the_url(self, browser, owner, api, hook):
        created = await register(api, owner, hook.url())
        endpoint_page = (await browser.get(f"/webhooks/{created['id']}")).body.decode()
        assert f'action="/webhooks/{created["id"]}/delete"' not in endpoint_page  # a link to the question only
        confirm = await browser.get(f"/webhooks/{created['id']}/delete")
        assert confirm.code == 200 and f"Delete the endpoint {hook.url()}? Deliveries to it stop" in text_of(confirm)
        assert len((await api.get("/v1/webhooks", token=owner.token)).body) == 1

    @pytest.mark.gen_test
    async def test_confirming_deletes_the_endpoint(self, browser, owner, api, hook):
        created = await register(api, owner, hook.url())
        question = f"/webhooks/{created['id']}/delete"
        r = await browser.submit(question, question)
        assert (r.code, r.headers["Location"]) == (303, LIST)
        assert (await api.get("/v1/webhooks", token=owner.token)).body == []
        assert (await browser.get(f"/webhooks/{created['id']}")).code == 404


    @pytest.mark.gen_test
    async def test_a_delete_sent_twice_answers_both_times_as_the_first(self, browser, owner, api, hook):
        created = await register(api, owner, hook.url())
        question = f"/webhooks/{created['id']}/delete"
        form = await browser.form_on(question, question)
        answers = [await browser.post(question, form) for _ in range(2)]
        assert [(r.code, r.headers["Location"]) for r in answers] == [(303, LIST)] * 2


class TestRotation:
    @pytest.mark.gen_test
    async def test_rotating_shows_a_new_secret_once(self, browser, owner, api, hook):
        created = await register(api, owner, hook.url())
        page = f"/webhooks/{created['id']}"
        shown = await browser.follow(await browser.submit(page, f"{page}/rotate-secret"))
        secret = shown_secret(shown)
        assert secret.startswith("whsec_") and secret != created["secret"]
        assert "The old one stopped working at once" in text_of(shown)
        assert shown_secret(await browser.get(page)) is None

    @pytest.mark.gen_test
    async def test_after_rotating_the_old_secret_no_longer_verifies(self, browser, owner, services, api, hook, worker,
                                                                   clock):
        created = await register(api, owner, hook.url())
        page = f"/webhooks/{created['id']}"
        secret = shown_secret(await browser.follow(await browser.submit(page, f"{page}/rotate-secret")))
        await issue_certificate(api, services, owner)
        await worker.tick()
        [got] = hook.received
        verify, now = readme_verifier(), clock.now().timestamp()
        assert verify(secret, got.headers, got.body, now=now)["type"] == "cert.issue_pending"
        with pytest.raises(ValueError, match="signature mismatch"):
            verify(created["secret"], got.headers, got.body, now=now)


class TestDeliveryLog:
    @pytest.mark.gen_test
    async def test_a_failed_attempt_is_shown_in_words(self, browser, owner, services, api, hook, worker):
        created = await register(api, owner, hook.url())
        hook.respond_with(500)
        await issue_certificate(api, services, owner)
        await worker.tick()
        log = text_of(await browser.get(f"/webhooks/{created['id']}"))
        assert "cert.issue_pending" in log and "last attempt failed; retrying at" in log
        assert "The receiver answered HTTP 500." in log

    @pytest.mark.gen_test
    async def test_a_deliverys_page_lists_its_attempts(self, browser, owner, services, api, hook, worker, clock):
        created = await register(api, owner, hook.url())
        hook.plan([500, 200])
        await issue_certificate(api, services, owner)
        await worker.tick()
        clock.advance(3600)
        await worker.tick()
        [d] = services.store.webhooks.deliveries(uuid.UUID(created["id"]), after=None, limit=10)
        page = await browser.get(f"/webhooks/{created['id']}/deliveries/{d.id}")
        rows = re.findall(r"<tr>(.*?)</tr>", page.body.decode().split("<tbody>")[1], re.DOTALL)
        words = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip() for row in rows]
        assert page.code == 200 and len(words) == 2
        assert words[0].startswith("1 2026-11-22 10:00:00 UTC HTTP 500")
        assert words[0].endswith("The receiver answered HTTP 500.")
        assert words[1].startswith("2 2026-11-22 11:00:00 UTC HTTP 200") and words[1].endswith("nothing: delivered")
        assert "Status: delivered" in text_of(page)

    @pytest.mark.gen_test
    async def test_a_receiver_nobody_listens_on_is_a_refused_connection_in_words(self, browser, owner, services, api,
                                                                                hook, worker):
        url = f"https://{hook.hostname}:{unused_port()}/hook"
        created = await register(api, owner, url)
        await issue_certificate(api, services, owner)
        await worker.tick()
        [d] = services.store.webhooks.deliveries(uuid.UUID(created["id"]), after=None, limit=10)
        page = text_of(await browser.get(f"/webhooks/{created['id']}/deliveries/{d.id}"))
        assert "no answer" in page and "refused the connection." in page

    @pytest.mark.gen_test
    async def test_redeliver_queues_a_new_attempt(self, browser, owner, services, api, hook, worker):
        created = await register(api, owner, hook.url())
        await issue_certificate(api, services, owner)
        await worker.tick()
        [d] = services.store.webhooks.deliveries(uuid.UUID(created["id"]), after=None, limit=10)
        log = f"/webhooks/{created['id']}"
        r = await browser.submit(log, f"{log}/deliveries/{d.id}/redeliver")
        assert (r.code, r.headers["Location"]) == (303, f"{log}/deliveries/{d.id}")
        assert "Status: queued, not sent yet" in text_of(await browser.follow(r))
        await worker.tick()
        assert len(hook.received) == 2
        assert text_of(await browser.get(f"{log}/deliveries/{d.id}")).count("nothing: delivered") == 2

    @pytest.mark.gen_test
    async def test_older_deliveries_are_on_the_next_page(self, browser, owner, services, api, hook, worker, clock):
        created = await register(api, owner, hook.url())
        for n in range(51):  # the log shows 50 a page
            await issue_certificate(api, services, owner, apex=f"h{n}.example.com")
            worker.fan_out()
            clock.advance(1)
        first = (await browser.get(f"/webhooks/{created['id']}")).body.decode()
        older = html.unescape(re.search(r'href="([^"]+)" id="older"', first).group(1))
        second = await browser.get(older)
        assert first.count(">Redeliver<") == 50 and second.body.decode().count(">Redeliver<") == 1
        assert 'id="older"' not in second.body.decode()


class TestAccess:
    @pytest.mark.gen_test
    async def test_a_read_only_member_sees_the_list_without_forms(self, browser, services, world, api, hook):
        owner = world.owner()
        await register(api, owner, hook.url())
        sign_in(browser, services, world.member(owner.workspace, "read_only"))
        page = await browser.get(LIST)
        assert page.code == 200 and hook.url() in text_of(page)
        assert 'action="/webhooks' not in page.body.decode() and 'href="/webhooks/' not in page.body.decode()

    @pytest.mark.gen_test
    async def test_a_read_only_members_posts_are_refused(self, browser, services, world, api, hook):
        owner = world.owner()
        created = await register(api, owner, hook.url())
        sign_in(browser, services, world.member(owner.workspace, "read_only"))
        base = f"/webhooks/{created['id']}"
        for path in (LIST, base, f"{base}/disable", f"{base}/rotate-secret", f"{base}/delete"):
            assert (await browser.post(path, {"url": hook.url(), "events": ["*"]})).code == 403, path
        [listed] = (await api.get("/v1/webhooks", token=owner.token)).body
        assert (listed["status"], listed["url"]) == ("active", hook.url())

    @pytest.mark.gen_test
    async def test_an_operator_may_not_open_the_delivery_log(self, browser, services, world, api, hook):
        owner = world.owner()
        created = await register(api, owner, hook.url())
        sign_in(browser, services, world.member(owner.workspace, "operator"))
        assert (await browser.get(f"/webhooks/{created['id']}")).code == 403

    @pytest.mark.gen_test
    async def test_another_workspaces_endpoint_and_delivery_are_not_found(self, browser, owner, services, world, api,
                                                                         hook, worker):
        other = world.owner()
        created = await register(api, other, hook.url())
        await issue_certificate(api, services, other)
        await worker.tick()
        [d] = services.store.webhooks.deliveries(uuid.UUID(created["id"]), after=None, limit=10)
        base = f"/webhooks/{created['id']}"
        for path in (base, f"{base}/delete", f"{base}/deliveries/{d.id}"):
            assert (await browser.get(path)).code == 404, path
        for path in (f"{base}/disable", f"{base}/delete", f"{base}/deliveries/{d.id}/redeliver"):
            assert (await browser.post(path, await browser.tokens())).code == 404, path
        assert (await api.get("/v1/webhooks", token=other.token)).body[0]["status"] == "active"

    @pytest.mark.gen_test
    async def test_an_unknown_delivery_is_not_found(self, browser, owner, api, hook):
        created = await register(api, owner, hook.url())
        assert (await browser.get(f"/webhooks/{created['id']}/deliveries/{uuid.uuid4()}")).code == 404
        assert (await browser.get(f"/webhooks/{created['id']}/deliveries/not-an-id")).code == 404


class TestRateLimit:
    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, rate_limits=RateLimitsConfig(api=3))

    @pytest.mark.gen_test
    async def test_webhook_actions_count_in_the_api_bucket(self, browser, owner, api, hook):
        created = await register(api, owner, hook.url())  # one api hit
        page = f"/webhooks/{created['id']}"
        codes = [(await browser.submit(page, f"{page}/rotate-secret")).code for _ in range(3)]
        assert codes == [303, 303, 429]
