"""A certificate's own clock: when it is renewed, when the last third of its life starts, and how
often the background checks look at it are fractions of its actual lifetime (``not_after -
not_before``), never fixed day counts. CA lifetimes keep shrinking (Let's Encrypt's six-day
``shortlived`` profile, 64 days for ``classic`` in 2027, 47 days industry-wide in 2029): a rule of
"30 days before expiry" or "daily" is either in the past at issuance or too slow to notice a renewal
that failed.

| moment or cadence | fraction of the lifetime | 90 days | 6 days |
|---|---|---|---|
| renewal time without the CA's window (ARI), and the start of the last third | 2/3 | day 60 (30 days before expiry) | day 4 |
| checks before the renewal time | every 1/24, at most ``[lifecycle] active_check_seconds`` | daily | every 6 h |
| checks from the renewal time on | every 1/90, at most daily | daily | every 1.6 h |

The lifetime asks no check closer to the next than ``MIN_CHECK`` (a certificate of minutes is a
test's); a shorter ``active_check_seconds`` is the operator's choice and is kept. A
certificate whose start is unknown is taken as a 90-day one (the spec's "30 days before expiry").
"""

from __future__ import annotations

import datetime as dt

#: The fraction of its life at which a certificate is renewed when its CA suggests no window.
RENEW_AT = 2 / 3
#: Checks in a lifetime, before its renewal time: a failure seen is seen with most of the life left.
CHECKS_PER_LIFETIME = 24
#: Checks in a lifetime, from its renewal time on (90: daily for a 90-day certificate).
CHECKS_PER_LIFETIME_RENEWING = 90
#: The shortest wait between two checks of an active certificate.
MIN_CHECK = dt.timedelta(minutes=15)
#: What a certificate whose start is unknown is taken to live.
DEFAULT_LIFETIME = dt.timedelta(days=90)
DAY = dt.timedelta(days=1)


def lifetime(not_before: dt.datetime | None, not_after: dt.datetime | None) -> dt.timedelta | None:
    """``not_after - not_before``; None when either is unknown or they make no life."""
    if not_before is None or not_after is None or not_after <= not_before:
        return None
    return not_after - not_before


def last_third_starts(not_before: dt.datetime, not_after: dt.datetime) -> dt.datetime:
    """Two thirds into the certificate's life: its renewal time without the CA's window, and the
    moment a certificate not renewed yet is overdue."""
    return not_before + (not_after - not_before) * RENEW_AT


def planned_renewal(not_after: dt.datetime | None, *, not_before: dt.datetime | None = None,
                    renew_at: dt.datetime | None = None) -> dt.datetime | None:
    """The renewal time shown (``nextRenewalAt``): the provider's own (ACME: in the CA's window, or
    at two thirds), else two thirds into the certificate's life, else 30 days before expiry (a
    90-day certificate's two thirds) when only the expiry is known."""
    if renew_at is not None:
        return renew_at
    if not_after is None:
        return None
    life = lifetime(not_before, not_after)
    if life is None:
        return not_after - DEFAULT_LIFETIME * (1 - RENEW_AT)
    return not_after - life * (1 - RENEW_AT)


def check_every(life: dt.timedelta | None, longest: float, *, renewing: bool) -> float:
    """Seconds between two checks of an active certificate living ``life`` (None: unknown, taken as
    90 days), never more than ``longest`` (``active_check_seconds``); ``renewing``: its renewal
    time has come."""
    life = life or DEFAULT_LIFETIME
    per_life = life / (CHECKS_PER_LIFETIME_RENEWING if renewing else CHECKS_PER_LIFETIME)
    seconds = max(per_life, MIN_CHECK).total_seconds()
    if renewing:
        seconds = min(seconds, DAY.total_seconds())
    return min(longest, seconds)
