"""The background checks: nothing stays pending, stale or silently at risk because nobody asked.

A sweep claims the domains whose ``next_check_at`` has come (store/lifecycle.py: a lease, so two
processes never check one domain at once and a crash loses no check), checks each as its state
asks (core/domains/schedule.py) and plans its next check:

- ``dns``: the domain's records are not both found yet, or it is verified without a certificate:
  exactly what ``verify-delegation`` does, issuance (and its event) included;
- ``certificate``: a pending, renewing or failed certificate is refreshed, as ``refresh`` stores it;
  a failure validating again can fix (a timed-out validation) is instead checked as
  ``verify-delegation`` checks it: with both records found, the provider validates again; and a
  request the service's own checks stopped before the provider was asked (CAA, DNSSEC, ACME's
  CNAME) is requested again once the CAA pre-flight and the CNAME pass, with no API call;
- ``active``: the delegation CNAME and CAA are checked for drift, and the certificate is read back
  from the provider, so a renewal it made moves ``notAfter`` and the rest; with ``[lifecycle]
  events = "transitions"`` that reading announces a renewal from another intermediate
  (``cert.chain_changed``) and a certificate past two thirds of its life without a successor
  (``cert.renewal_overdue``, once per certificate): core/certificates/events.py.

Provider calls made here are marked as background (core/edge/pacing.py): they take at most
``[lifecycle] provider_share`` of the request window and let everyone else go first.

Workspaces share the checks fairly. At most ``BATCH`` checks run at once, a workspace's at most
``[lifecycle] checks_per_workspace`` of them; a slot that frees is claimed again at once, the
workspaces taking turns (store/lifecycle.py), so a slow check holds its own slot only. A zone
whose nameservers gave no answer is left alone for a while (core/lifecycle/quiet_zones.py): the
checks of its other hostnames are deferred without a lookup. A lookup that only missed its time
(the zone's nameservers answer) is the resolver's passing failure: that check is made again after
``interval_seconds``, once. The claim, and each read or write of a check, is a unit of work of its
own (``store.run``), between the check's DNS and provider calls.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import uuid
from collections import Counter
from typing import TYPE_CHECKING

import attrs

from core.certificates import issuance
from core.certificates.states import revalidation_can_fix, stopped_before_provider
from core.clock import truncate_ms
from core.config import Config
from core.dns import caa
from core.domains import schedule
from core.domains.drift import CAA, announce, with_drift
from core.edge import ProviderBusy, ProviderError
from core.edge.pacing import BACKGROUND, BACKGROUND_MAX_WAIT
from core.edge.words import ProviderWords, provider_words
from core.errors import NotFound
from core.lifecycle.quiet_zones import QuietZones, quiet_seconds
from core.verification import checks
from store.records import Certificate, DomainRow, DriftProblem, Workspace

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)

#: Checks run at once; a check is claimed only when a slot is free for it, so its lease need only
#: outlive one check.
BATCH = 32
#: Sequential DNS questions one check may ask at most (its lookups, the walk to the zone, CAA).
_DNS_STEPS = 10
#: Domains whose last check missed, remembered at most (per process).
MAX_MISSED = 10_000


@attrs.frozen
class _Ran:
    status: str
    "The check's outcome, for the metrics: a status, or what kept it from one."
    wait: float | None = None
    "At least this long before the next check: how long the resolver keeps a negative answer it gave."
    missed: bool = False
    "A lookup got no answer though the zone's nameservers answer (``VerifyResult.missed``)."


def lease_for(config: Config) -> dt.timedelta:
    """How long a claimed check is held: longer than one check can take (two provider calls, each
    waiting its turn, timing out and retrying; and every DNS question timing out)."""
    seconds = _DNS_STEPS * config.dns.timeout_seconds + 10
    if config.provider.kind == "cloudflare":
        cf = config.provider.cloudflare
        seconds += 2 * (min(BACKGROUND_MAX_WAIT, cf.window_seconds) + cf.timeout_seconds + cf.retry_seconds)
    return dt.timedelta(seconds=seconds)


class LifecycleWatcher:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.lease = lease_for(services.config)
        self.quiet = QuietZones(services.clock, quiet_seconds(services.config.lifecycle))
        self._running = False
        self._busy: Counter[uuid.UUID] = Counter()
        "Checks running, by workspace."
        self._refreshing: Counter[uuid.UUID] = Counter()
        "Those of them refreshing a requested certificate (store/lifecycle.py: they go first, to a point)."
        self._last: uuid.UUID | None = None
        "The workspace whose check was claimed last: the next claim's turns start after it."
        self._missed: set[uuid.UUID] = set()
        "Domains whose last check here learnt nothing (a lookup missed): the next miss backs off."

    async def tick(self) -> None:
        """Check everything due, a check claimed for each free slot, until nothing due is left
        that a slot may take; a tick while one runs is skipped (it takes what falls due meanwhile)."""
        if self._running:
            return
        self._running = True
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                claimed = await self.services.store.run(self._claim, BATCH - len(running)) if len(running) < BATCH else []
                for workspace_id, domain_id in claimed:
                    self._busy[workspace_id] += 1
                    running.add(asyncio.ensure_future(self._slot(workspace_id, domain_id)))
                if not running:
                    break
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                running -= done
        finally:
            if running:
                await asyncio.wait(running)  # a tick cancelled mid-sweep still plans what it claimed
            self._running = False

    async def _slot(self, workspace_id: uuid.UUID, domain_id: uuid.UUID) -> None:
        try:
            await self.check(workspace_id, domain_id)
        finally:
            self._busy[workspace_id] -= 1
            if not self._busy[workspace_id]:
                del self._busy[workspace_id]

    def _claim(self, free: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
        now = self.services.clock.now()
        with self.services.store.transaction(row_locked=True):  # store/lifecycle.py: claim
            claimed = self.services.store.lifecycle.claim(
                now, truncate_ms(now + self.lease), free, cap=self.services.config.lifecycle.checks_per_workspace,
                running=self._busy, refreshing=self._refreshing, after=self._last)
        if claimed:
            self._last = claimed[-1][0]
        return claimed

    async def check(self, workspace_id: uuid.UUID, domain_id: uuid.UUID) -> None:
        """Check one claimed domain and plan its next check; never raises."""
        workspace, before = await self.services.store.run(self._load, workspace_id, domain_id)
        if workspace is None or before is None:
            return  # deleted meanwhile
        kind = schedule.kind(before)
        refresh = schedule.requested(before)
        self._refreshing[workspace_id] += refresh
        token = BACKGROUND.set(True)
        wait: float | None = self.quiet.wait(before.apex) if kind != "certificate" else None
        missed = False
        try:
            if wait is not None:
                outcome = "deferred"  # its zone gave no answer a moment ago
            else:
                ran = await self._run(kind, workspace, before)
                outcome, wait, missed = ran.status, ran.wait, ran.missed
        except ProviderBusy as exc:
            outcome, wait = "deferred", exc.retry_after
        except (ProviderError, NotFound) as exc:
            outcome = "failed"
            log.info("lifecycle check (%s) of %s: %s", kind, before.apex, exc)
        except Exception:  # one domain's surprise must not end the sweep for the rest
            outcome = "failed"
            log.exception("lifecycle check (%s) of %s failed", kind, before.apex)
        finally:
            BACKGROUND.reset(token)
            self._refreshing[workspace_id] -= refresh
            if not self._refreshing[workspace_id]:
                del self._refreshing[workspace_id]
        await self.services.store.run(self._plan, before, wait, self._soon(before, missed))
        self.services.metrics.lifecycle_checks.labels(kind, outcome).inc()

    def _soon(self, row: DomainRow, missed: bool) -> bool:
        """Whether the check, which learnt nothing (``missed``), is made again soon (core/domains/
        schedule.py; an active domain's next look stays on its own schedule): after the first miss
        only. A second in a row takes the backoff: a resolver that keeps failing is not asked every
        ``interval_seconds`` for days."""
        if not missed:
            self._missed.discard(row.id)
            return False
        if row.id in self._missed:
            return False
        if len(self._missed) >= MAX_MISSED:
            self._missed.clear()  # remembering is an economy: at worst one more soon check each
        self._missed.add(row.id)
        return True

    def _load(self, workspace_id: uuid.UUID, domain_id: uuid.UUID) -> tuple[Workspace | None, DomainRow | None]:
        store = self.services.store
        return store.accounts.get_workspace(workspace_id), store.domains.get(workspace_id, domain_id)

    async def _run(self, kind: schedule.Kind, workspace: Workspace, row: DomainRow) -> _Ran:
        """The check itself: its outcome (a status), how long the resolver keeps a negative answer it
        got, and whether a lookup only missed."""
        store = self.services.store
        if kind == "dns":
            result = await self._verify(workspace, row)
            return _Ran(result.status, result.cached_for, result.missed)
        if kind == "active":
            result = await self._verify(workspace, row)
            verdict = await caa.preflight(self.services.dns, row.apex, await self.services.provider.caa_issuers())
            latest = await store.run(self._caa_drift, workspace, row, verdict)
            wait = result.cached_for
        else:
            latest, wait = await store.run(store.certificates.latest, workspace.id, row.id), None
            if latest is not None and row.cert_status == "error" and stopped_before_provider(latest):
                return await self._retry_stopped(workspace, row)
            if latest is not None and row.cert_status == "error" and revalidation_can_fix(latest):
                # Refreshing would read the same failure for ever: it needs the records, then a new request.
                result = await self._verify(workspace, row)
                if result.certificate is not None:
                    return _Ran(result.certificate.status, result.cached_for)
                # Not started (drift: a record is missing) or no answer from the provider: refreshed as any failure.
        if latest is None or latest.provider_hostname_id is None:
            return _Ran("no_certificate", wait)
        summary = await issuance.refresh_loaded(self.services, workspace, latest)
        return _Ran(summary.status, wait)

    async def _retry_stopped(self, workspace: Workspace, row: DomainRow) -> _Ran:
        """A request the service's own checks stopped before the provider was asked: CAA, DNSSEC
        (the pre-flight), or the CNAME (checked as verify-delegation checks it). Each named its fix;
        once the pre-flight passes the domain is checked as verify-delegation does, which requests
        issuance again when the CNAME is right too. While the pre-flight still stops it nothing is
        stored or asked: no new certificate, no event, only the next check on the backoff."""
        verdict = await caa.preflight(self.services.dns, row.apex, await self.services.provider.caa_issuers())
        if not verdict.allowed:
            return _Ran("waiting")
        await self.services.store.run(self._caa_drift, workspace, row, verdict)  # CAA drift recorded before is gone
        result = await self._verify(workspace, row)
        status = result.certificate.status if result.certificate is not None else "no_certificate"
        return _Ran(status, result.cached_for, result.missed)

    async def _verify(self, workspace: Workspace, row: DomainRow) -> checks.VerifyResult:
        result = await checks.verify(self.services, workspace=workspace, domain_id=row.id, asked=False)
        if result.silent_zone is not None:
            self.quiet.mark(result.silent_zone)
        return result

    def _caa_drift(self, workspace: Workspace, row: DomainRow, verdict: caa.CaaVerdict) -> Certificate | None:
        """CAA that no longer lets the provider's certificate authorities issue: the next renewal
        fails. Returns the domain's latest certificate, which the check reads back next."""
        found = [] if verdict.allowed or verdict.dnssec else [
            DriftProblem("caa_forbids", verdict.message or "CAA forbids issuance.",
                         f"Add CAA records that allow {_caa_whom(provider_words(self.services.config.provider))} "
                         "(see the message).")]
        now = self.services.clock.now()
        store = self.services.store
        with store.transaction():
            current = store.domains.get(workspace.id, row.id)
            if current is not None and (found or any(p.code in CAA for p in current.drift)):
                updated = with_drift(current, found, replacing=CAA, now=now)
                store.domains.update(updated)
                announce(self.services, current, updated)
        return store.certificates.latest(workspace.id, row.id)

    def _plan(self, before: DomainRow, wait: float | None, soon: bool) -> None:
        store = self.services.store
        now = self.services.clock.now()
        with store.transaction():
            current = store.domains.get(before.workspace_id, before.id)
            if current is None:
                return
            if current.checks_since != before.checks_since:
                return  # a person asked for a check meanwhile, which started the schedule again
            store.domains.update(schedule.after_check(before, current, self.services.config.lifecycle, now,
                                                      wait_at_least=wait, soon=soon))


def _caa_whom(words: ProviderWords) -> str:
    """Whom CAA must allow: the CA the service orders from, or the edge provider's CAs."""
    return words.issuer if words.acme else "the edge provider's certificate authorities"
