"""When the background checks look at a domain next (docs/concepts.md, "Lifecycle"): the one place the
schedule is decided, from what the domain is waiting for.

| the domain | checked | stops |
|---|---|---|
| records not both found, or verified with no certificate yet | after ``interval_seconds``, doubling up to ``max_interval_seconds`` | ``pending_days`` after creation or the last check a person asked for |
| certificate pending or renewing | the same backoff | never (the provider ends it: active or failed) |
| certificate failed | the same backoff (refreshed; a timed-out validation is validated again once the records are found) | as for records not found |
| certificate active | every 1/24 of its lifetime (``notAfter`` - ``lastIssuedAt``), at most ``active_check_seconds``; every 1/90 of it (at most daily) from ``nextRenewalAt`` on (core/lifetimes.py); at the provider's own renewal time (ACME); at ``notAfter`` at the latest; once the resolver's cache expires, when drift only waits for it | never |
| certificate blocked | every ``active_check_seconds`` (drift only) | never |

Every wait gets up to 20 % jitter, so domains created together (a bulk request) spread out. After
a negative DNS answer the next check waits at least as long as the resolver will keep that answer:
asking again sooner would only read the cached "no". A check that learnt nothing (a lookup got no
answer in time while the zone's nameservers answer) is made again after ``interval_seconds``, its
backoff step kept (``soon``; the watcher asks that once in a row).
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Literal

import attrs

from core import lifetimes
from core.config import LifecycleConfig
from core.domains.drift import only_waiting
from store.records import DomainRow

Kind = Literal["dns", "certificate", "active"]
JITTER = 0.2


def kind(row: DomainRow) -> Kind:
    """What a check of this domain does: verify its DNS (and start issuance), refresh its
    certificate, or re-read an active certificate and look for drift.

    A failed certificate is refreshed, never requested anew (each request queues an event, spec); a
    failure only validating again can fix is validated again once a DNS check finds the records
    (core/lifecycle/watcher.py), which the provider then works on as pending for days, not every check."""
    if row.validation_status != "verified" or row.cert_status == "none":
        return "dns"
    if row.cert_status in ("pending", "renewing", "error"):
        return "certificate"
    return "active"


def requested(row: DomainRow) -> bool:
    """Whether a check of this domain reads back a certificate requested and not issued yet:
    such checks go before newer domains' verifications (store/lifecycle.py, ``domains_refresh_due``)."""
    return row.cert_status in ("pending", "renewing")


def _jittered(seconds: float) -> dt.timedelta:
    return dt.timedelta(seconds=seconds * (1 + random.uniform(0, JITTER)))


def first(config: LifecycleConfig, now: dt.datetime) -> dt.datetime:
    """A new domain's first check, or the first after a check a person asked for."""
    return now + _jittered(config.interval_seconds)


def restarted(row: DomainRow, config: LifecycleConfig, now: dt.datetime) -> DomainRow:
    """``row`` after a check a person asked for: the schedule starts again."""
    return attrs.evolve(row, next_check_at=first(config, now), check_step=0, checks_since=now)


def after_check(before: DomainRow, row: DomainRow, config: LifecycleConfig, now: dt.datetime, *,
                wait_at_least: float | None = None, soon: bool = False) -> DomainRow:
    """``row`` (the domain after a background check of ``before``) with its next check planned.

    ``wait_at_least``: seconds a resolver keeps the negative answer the check just got. ``soon``:
    the check learnt nothing; it is made again after ``interval_seconds``, the step unchanged.
    """
    what = kind(row)
    step = before.check_step + 1 if kind(before) == what else 0
    since = row.checks_since or row.created_at
    if what == "active":
        # On the certificate's own clock: a six-day certificate is looked at every few hours.
        renewing = row.cert_next_renewal_at is not None and now >= row.cert_next_renewal_at
        interval = lifetimes.check_every(lifetimes.lifetime(row.cert_last_issued_at, row.cert_not_after),
                                         config.active_check_seconds, renewing=renewing)
        if only_waiting(row.drift):
            interval = min(interval, config.interval_seconds)  # the cache's answer expires: look then
        due = now + _jittered(interval)
        # The window's start, the provider's own renewal time, and the expiry are never missed.
        for moment in (row.cert_next_renewal_at, row.cert_renew_at, row.cert_not_after):
            if moment is not None and now < moment < due:
                due = moment
    elif (what == "dns" or row.cert_status == "error") and now >= since + dt.timedelta(days=config.pending_days):
        return attrs.evolve(row, next_check_at=None, check_step=step)
    elif soon and kind(before) == what:
        step = before.check_step
        due = now + _jittered(config.interval_seconds)
    else:
        due = now + _jittered(min(config.interval_seconds * 2 ** min(step, 30), config.max_interval_seconds))
    if wait_at_least is not None:
        due = max(due, now + dt.timedelta(seconds=wait_at_least))
    return attrs.evolve(row, next_check_at=due, check_step=step)
