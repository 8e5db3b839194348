"""One request budget per provider adapter, so a burst of work never earns us a 429.

Cloudflare blocks *every* call of a token for minutes once it is over its limit, so staying under
it matters more than any single request. The ``Pacer`` counts our own calls in a sliding window and
also believes what the provider says (``Ratelimit`` and ``Retry-After``), since the same token may
be spent elsewhere (the dashboard, another installation).
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable

from core.edge import ProviderBusy


class Pacer:
    """At most ``requests`` calls in any ``window_seconds``, and never more than the provider allows."""

    def __init__(
        self,
        requests: int,
        window_seconds: float,
        *,
        max_wait_seconds: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.requests = requests
        self.window_seconds = window_seconds
        self.max_wait_seconds = max_wait_seconds
        self._monotonic = monotonic
        self._sleep = sleep
        self._sent: deque[float] = deque()
        self._blocked_until = 0.0
        self._remaining: int | None = None  # what the provider said is left, until _remaining_until
        self._remaining_until = 0.0

    def _wait(self, now: float) -> float:
        """Seconds until a call may go (0 when it may go now)."""
        while self._sent and self._sent[0] <= now - self.window_seconds:
            self._sent.popleft()
        waits = [self._blocked_until - now]
        if len(self._sent) >= self.requests:
            waits.append(self._sent[len(self._sent) - self.requests] + self.window_seconds - now)
        if self._remaining is not None:
            if now >= self._remaining_until:
                self._remaining = None
            elif self._remaining <= 0:
                waits.append(self._remaining_until - now)
        return max(0.0, *waits)

    async def acquire(self) -> None:
        """Take one call from the budget, waiting briefly if that is enough.

        A longer wait is not worth holding a request open for: ``ProviderBusy`` tells the caller
        when to come back, and nothing is taken from the budget.
        """
        while True:
            now = self._monotonic()
            wait = self._wait(now)
            if wait <= 0:
                self._sent.append(now)
                if self._remaining is not None:
                    self._remaining -= 1
                return
            if wait > self.max_wait_seconds:
                # Rounded first: (now + 30) - now can be 30.000000000004 in floats, which is not 31 s.
                raise ProviderBusy(math.ceil(round(wait, 3)))
            await self._sleep(wait)  # then look again: another caller may have taken the slot

    def observe(self, *, remaining: int | None, reset_seconds: float | None, retry_after: float | None) -> None:
        """Believe the provider's own accounting from one response's headers."""
        now = self._monotonic()
        if retry_after is not None and retry_after > 0:
            self._blocked_until = max(self._blocked_until, now + retry_after)
        if remaining is not None:
            self._remaining = remaining
            reset = reset_seconds if reset_seconds is not None else self.window_seconds
            self._remaining_until = now + reset


def parse_ratelimit(header: str | None) -> tuple[int | None, float | None]:
    """``(remaining, reset seconds)`` from ``Ratelimit: "default";r=50;t=30`` (the tightest item)."""
    best: tuple[int | None, float | None] = (None, None)
    for item in (header or "").split(","):
        params = {}
        for part in item.split(";")[1:]:
            key, _, value = part.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        try:
            remaining = int(params["r"])
            reset = float(params["t"]) if "t" in params else None
        except (KeyError, ValueError):
            continue
        if best[0] is None or remaining < best[0]:
            best = (remaining, reset)
    return best


def parse_retry_after(header: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``Retry-After`` (delta-seconds or an HTTP date); ``None`` if absent or bad."""
    if not header:
        return None
    value = header.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
