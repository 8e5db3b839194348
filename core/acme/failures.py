"""Failed validations, paced: a hostname whose validation a CA refused is never ordered again into
the same failure, nor past the CA's limits.

A CA counts each refused validation against the hostname at our account: Let's Encrypt allows 5
an hour, and after 1,152 in a row (a day and more of them) pauses the hostname for the account
until a person unpauses it at the link it gives. The commonest refusal passes by itself: the
value was published, but a resolver the CA asks still holds an earlier "no such name" for it, for
as long as the delegation zone's SOA says (60 s from the built-in server). An order placed inside
that minute fails the same way; one placed after it succeeds. So, per hostname and CA
(store/acme_validations.py):

- **After a refusal, the next order waits** at least the negative TTL the failure implies (the
  delegation zone's SOA minimum, and a few seconds), and, for the background checks, twice as
  long after each further refusal in a row (1, 2, 4, 8 ... minutes);
- **never past the CA's hourly limit**: at most ``failed_validations_per_hour`` refusals in any
  hour, counted over every order, whoever asked;
- **after ``stop_after_failed_validations`` refusals in a row, ordering stops** and says why, until
  the hostname's records change (the CNAME's chain, CAA) or a person asks (verify-delegation,
  recheck, issue, refresh: a request that is not the background checks'); a person's request
  still waits for the negative TTL and the hourly limit;
- **a hostname the CA paused** (``paused``, with the CA's link) is not ordered again until a
  person asks, presumably after unpausing it.

An issued certificate ends the run of refusals; the last hour's refusals are still counted.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import attrs

from core.acme.problems import Refusal
from core.clock import by_minute
from store.acme_validations import AcmeValidations

if TYPE_CHECKING:
    from store import Store

HOUR = dt.timedelta(hours=1)
#: Added to the negative TTL: the CA's resolver began counting it a moment after we did.
MARGIN = dt.timedelta(seconds=5)
#: The background checks' wait after the first refusal of a run, doubled after each further one.
FIRST_WAIT = dt.timedelta(minutes=1)


@attrs.frozen
class Limits:
    per_hour: int
    "The CA's failed validations per hostname and hour: never reached past."
    stop_after: int
    "Refusals in a row after which the background checks order no more."
    negative_ttl: int
    "Seconds a resolver may keep the delegation zone's negative answer (its SOA's TTL and minimum)."


@attrs.frozen
class Held:
    """Why no order may go for the hostname now."""

    until: dt.datetime | None
    "When one may; None: not by itself (the records must change, or a person ask)."
    why: str
    "A sentence for the customer."


def failed(before: AcmeValidations | None, refusal: Refusal, *, directory_url: str, apex: str, now: dt.datetime,
           limits: Limits, records: str | None) -> AcmeValidations:
    """The hostname's failures with ``refusal`` added, and when the next order may go."""
    recent = (*_within_hour(before, now), now)
    consecutive = (before.consecutive if before is not None else 0) + 1
    waits = [dt.timedelta(seconds=limits.negative_ttl) + MARGIN, FIRST_WAIT * 2 ** min(consecutive - 1, 16),
             _hourly_wait(recent, now, limits)]
    if refusal.kind == "limited":
        waits.append(HOUR)
    stopped = "paused" if refusal.kind == "paused" else "failures" if consecutive >= limits.stop_after else None
    return AcmeValidations(
        directory_url=directory_url, apex=apex, consecutive=consecutive, recent=recent, kind=refusal.kind,
        reason=refusal.words, updated_at=now, next_order_at=now + max(waits), stopped=stopped,
        link=refusal.link if refusal.kind == "paused" else None, records=records,
    )


def issued(before: AcmeValidations | None, now: dt.datetime) -> AcmeValidations | None:
    """After a certificate was issued: the run of refusals is over; the last hour's still count."""
    if before is None:
        return None
    recent = _within_hour(before, now)
    if not recent:
        return None
    return attrs.evolve(before, consecutive=0, recent=recent, next_order_at=None, stopped=None, link=None,
                        updated_at=now)


def held(validations: AcmeValidations | None, *, now: dt.datetime, person: bool, records: str | None,
         limits: Limits) -> Held | None:
    """Why the hostname may not be ordered now, if it may not.

    ``person``: a person's request (not the background checks'), which lifts a stop but not the
    waits that keep the CA's limits. ``records``: the hostname's records as they look now."""
    v = validations
    if v is None:
        return None
    changed = records is not None and v.records is not None and records != v.records
    if v.stopped == "paused" and not person:
        return Held(None, f"The certificate authority paused issuance for {v.apex} for the service's account; no "
                          f"order is placed until it is unpaused at {v.link or 'the page it links to'} and someone "
                          "checks again.")
    if v.stopped == "failures" and not person and not changed:
        return Held(None, f"After {v.consecutive} failed validations in a row the service stopped ordering for "
                          f"{v.apex}: it orders again when its records change, or when someone checks again "
                          "(verify-delegation or recheck).")
    recent = _within_hour(v, now)
    waits = [_hourly_wait(recent, now, limits)]
    if recent:
        waits.append(recent[-1] + dt.timedelta(seconds=limits.negative_ttl) + MARGIN - now)
    if (not person or v.kind == "limited") and v.next_order_at is not None and not changed:
        waits.append(v.next_order_at - now)
    wait = max(waits)
    if wait <= dt.timedelta(0):
        return None
    until = now + wait
    if recent and len(recent) >= limits.per_hour and wait == waits[0]:
        why = (f"{len(recent)} validations of {v.apex} failed in the last hour, the most the certificate authority "
               f"allows: the next order goes after {by_minute(until)}.")
    else:
        why = (f"The last validation of {v.apex} failed at {(recent[-1] if recent else v.updated_at):%H:%M:%S} UTC: "
               f"the next order goes after {by_minute(until)}, when the certificate authority's resolvers no longer "
               "hold the answer it got.")
    return Held(until, why)


def _within_hour(v: AcmeValidations | None, now: dt.datetime) -> tuple[dt.datetime, ...]:
    return tuple(t for t in (v.recent if v is not None else ()) if t > now - HOUR)


def _hourly_wait(recent: tuple[dt.datetime, ...], now: dt.datetime, limits: Limits) -> dt.timedelta:
    """Until fewer than ``per_hour`` refusals are in the last hour: the next may fail too."""
    if len(recent) < limits.per_hour:
        return dt.timedelta(0)
    return recent[len(recent) - limits.per_hour] + HOUR - now


def note_failure(store: Store, directory_url: str, apex: str, refusal: Refusal, now: dt.datetime, limits: Limits,
                 records: str | None) -> AcmeValidations:
    """One unit of work: ``refusal`` noted (``failed``)."""
    with store.transaction():
        noted = failed(store.acme_validations.get(directory_url, apex), refusal, directory_url=directory_url,
                       apex=apex, now=now, limits=limits, records=records)
        store.acme_validations.put(noted)
        return noted


def note_issued(store: Store, directory_url: str, apex: str, now: dt.datetime) -> None:
    """One unit of work: a certificate was issued for ``apex`` (``issued``)."""
    with store.transaction():
        after = issued(store.acme_validations.get(directory_url, apex), now)
        if after is None:
            store.acme_validations.delete(directory_url, apex)
        else:
            store.acme_validations.put(after)
