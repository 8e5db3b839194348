"""Issue 46: renewals as CAs answered every client in 2025-26. An order whose ``replaces`` the CA
refuses (``alreadyReplaced`` after an abandoned order; a certificate another account issued) goes
again without it; the renewal window is read again when the CA's ``Retry-After`` says; a window
the CA moved into the past renews at the next check; the CA's ``explanationURL`` reaches the
messages, the diagnosis and the log. Against Pebble behind a front that answers as such a CA
does (tests/servers/pebble.py ``Directory``; Debian's Pebble 2.4 has no ARI)."""

from __future__ import annotations

import datetime as dt
import logging
import uuid

import pytest

from core.acme import keys
from core.lifecycle.watcher import LifecycleWatcher
from tests.acme.conftest import needs_lab
from tests.acme.test_failed_validations import orders_of
from tests.acme.test_issuing import add, served, verify_until_issued

pytestmark = needs_lab
EXPLAINED = "https://ca.test/incidents/2026-03-revocation"


async def issued(api, world, acme_lab, clock, apex: str):
    """A certificate for ``apex`` whose window opens in 40 days."""
    caller, created = await add(api, world, apex)
    acme_lab.publish_records(created)
    acme_lab.directory.window = (clock.now() + dt.timedelta(days=40), clock.now() + dt.timedelta(days=41))
    await verify_until_issued(api, caller, created)
    return caller, created


async def refresh(api, services, caller, created):
    latest = services.store.certificates.latest(caller.workspace.id, uuid.UUID(created["id"]))
    r = await api.post(f"/v1/certificates/{latest.id}/refresh", token=caller.token)
    assert r.status == 200, r.body
    return r.body


class TestAReplacesTheCaRefuses:
    @pytest.mark.gen_test
    async def test_already_replaced_is_ordered_again_without_replaces(self, api, world, acme_lab, front, services,
                                                                      clock):
        caller, created = await issued(api, world, acme_lab, clock, "replaced.lab.com")
        first = served(services, "replaced.lab.com")
        front.refuse_replaces = (409, {"type": "urn:ietf:params:acme:error:alreadyReplaced",
                                       "detail": "the certificate named in replaces was already replaced"})
        clock.advance(41 * 86400)
        await refresh(api, services, caller, created)
        assert served(services, "replaced.lab.com").chain_pem != first.chain_pem
        assert ["replaces" in o for o in orders_of(front, "replaced.lab.com")[-2:]] == [True, False]

    @pytest.mark.gen_test
    async def test_a_certificate_another_account_issued_is_ordered_again_without_replaces(
            self, api, world, acme_lab, front, services, clock):
        caller, created = await issued(api, world, acme_lab, clock, "moved-account.lab.com")
        first = served(services, "moved-account.lab.com")
        front.refuse_replaces = (403, {"type": "urn:ietf:params:acme:error:unauthorized",
                                       "detail": "the certificate named in replaces was not issued to this account"})
        clock.advance(41 * 86400)
        await refresh(api, services, caller, created)
        assert served(services, "moved-account.lab.com").chain_pem != first.chain_pem


class TestRetryAfter:
    @pytest.mark.gen_test
    async def test_the_window_is_read_again_once_the_cas_retry_after_passed(self, api, world, acme_lab, front,
                                                                          services, clock):
        front.retry_after = "3600"
        caller, created = await issued(api, world, acme_lab, clock, "soon.lab.com")
        asked = len(front.asked)
        clock.advance(3601)
        await refresh(api, services, caller, created)
        assert len(front.asked) == asked + 1

    @pytest.mark.gen_test
    async def test_the_window_is_not_read_again_before_the_cas_retry_after(self, api, world, acme_lab, front,
                                                                         services, clock):
        front.retry_after = "43200"
        caller, created = await issued(api, world, acme_lab, clock, "later.lab.com")
        asked = len(front.asked)
        clock.advance(7 * 3600)
        await refresh(api, services, caller, created)
        assert len(front.asked) == asked


class TestAWindowMovedIntoThePast:
    @pytest.mark.gen_test
    async def test_the_certificate_is_renewed_at_the_next_background_check(self, api, world, acme_lab, front,
                                                                         services, clock):
        front.retry_after = "60"  # the CA asks to be asked again in a minute: a revocation is coming
        caller, created = await issued(api, world, acme_lab, clock, "revoked-soon.lab.com")
        first = served(services, "revoked-soon.lab.com")
        front.windows[keys.ari_id(first.chain_pem)] = (clock.now() - dt.timedelta(days=2),
                                                       clock.now() - dt.timedelta(days=1))
        row = services.store.domains.get(caller.workspace.id, uuid.UUID(created["id"]))
        clock.advance((row.next_check_at - clock.now()).total_seconds() + 1)
        await LifecycleWatcher(services).tick()
        assert served(services, "revoked-soon.lab.com").chain_pem != first.chain_pem


class TestTheCasExplanation:
    @pytest.fixture(autouse=True)
    def explained(self, front, clock):
        front.explanation_url = EXPLAINED

    @pytest.mark.gen_test
    async def test_it_reaches_the_answer_of_a_refresh(self, api, world, acme_lab, services, clock):
        caller, created = await issued(api, world, acme_lab, clock, "explained.lab.com")
        assert EXPLAINED in (await refresh(api, services, caller, created))["message"]

    @pytest.mark.gen_test
    async def test_it_reaches_the_diagnosis(self, api, world, acme_lab, clock):
        caller, created = await issued(api, world, acme_lab, clock, "diagnosed.lab.com")
        report = (await api.get(f"/v1/domains/{created['id']}/diagnosis", token=caller.token)).body
        [finding] = [f for f in report["findings"] if f["code"] == "renewal_explained"]
        assert EXPLAINED in finding["message"]

    @pytest.mark.gen_test
    async def test_it_reaches_the_log_with_the_window(self, api, world, acme_lab, clock, caplog):
        with caplog.at_level(logging.WARNING, logger="core.acme"):
            await issued(api, world, acme_lab, clock, "logged.lab.com")
        assert any(EXPLAINED in r.getMessage() and "logged.lab.com" in r.getMessage() for r in caplog.records)


class TestNextRenewalAt:
    @pytest.mark.gen_test
    async def test_next_renewal_at_is_the_renewal_time_used(self, api, world, acme_lab, services, clock):
        caller, created = await issued(api, world, acme_lab, clock, "planned.lab.com")
        renew_at = served(services, "planned.lab.com").renew_at
        domain = (await api.get(f"/v1/domains/{created['id']}", token=caller.token)).body
        assert renew_at is not None and dt.datetime.fromisoformat(domain["cert"]["nextRenewalAt"]) == renew_at
