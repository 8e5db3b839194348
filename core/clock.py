"""The one source of time, injectable so tests can move it (expiry, windows, backoff)."""

from __future__ import annotations

import datetime as dt
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> dt.datetime:
        """The current time, timezone-aware UTC, truncated to milliseconds."""

    def timestamp(self) -> float:
        """The current time in seconds since the epoch, for what is counted on every request
        (rate-limit windows), where building a datetime is a cost of its own."""


def truncate_ms(value: dt.datetime) -> dt.datetime:
    """Drop sub-millisecond precision so stored and shown timestamps compare equal."""
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


class SystemClock:
    def now(self) -> dt.datetime:
        return truncate_ms(dt.datetime.now(dt.UTC))

    def timestamp(self) -> float:
        return time.time()


def by_minute(moment: dt.datetime) -> str:
    """``HH:MM UTC``, for "by HH:MM": rounded up to the minute, so it is never early."""
    if moment.second or moment.microsecond:
        moment = moment.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    return moment.astimezone(dt.UTC).strftime("%H:%M UTC")
