"""One request budget per provider adapter, so a burst of work never earns us a 429.

Cloudflare blocks *every* call of a token for minutes once it is over its limit, so staying under
it matters more than any single request. The ``Pacer`` counts our own calls in a sliding window and
also believes what the provider says (``Ratelimit`` and ``Retry-After``), since the same token may
be spent elsewhere (the dashboard, another installation).

Calls the background checks make (core/lifecycle/, marked with ``BACKGROUND``) come second: they
take at most ``background_share`` of the window, spread evenly over it, wait while a person's or
client's call waits, and wait for their turn instead of failing with ``ProviderBusy`` (up to
``BACKGROUND_MAX_WAIT`` or one window, whichever is shorter, so a check's lease outlives its
wait). The rest of the window stays free for the calls someone is waiting on.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable

from core.edge import ProviderBusy
from core.edge.shared_budget import SharedBudget

#: Set (to True) around the provider calls no one is waiting on.
BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar("background_provider_call", default=False)
#: The longest a background call waits for its turn before it gives up with ``ProviderBusy``.
BACKGROUND_MAX_WAIT = 60.0
#: How often a background call waiting behind a person's call looks again.
_YIELD_SECONDS = 0.05


class Pacer:
    """At most ``requests`` calls in any ``window_seconds``, and never more than the provider allows."""

    def __init__(
        self,
        requests: int,
        window_seconds: float,
        *,
        background_share: float = 1.0,
        max_wait_seconds: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.requests = requests
        self.window_seconds = window_seconds
        self.background_requests = max(1, int(requests * background_share))
        "The most background calls in any window."
        self.max_wait_seconds = max_wait_seconds
        self._monotonic = monotonic
        self._sleep = sleep
        self._sent: deque[float] = deque()
        self._background_sent: deque[float] = deque()
        self._background_next = 0.0  # when the next background call may go: they are spread evenly
        self._waiting = 0  # calls someone is waiting on, sleeping for their turn
        self._blocked_until = 0.0
        self._remaining: int | None = None  # what the provider said is left, until _remaining_until
        self._remaining_until = 0.0
        self.shared: SharedBudget | None = None
        "The budget every process on one PostgreSQL database takes its calls from, after this one."

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

    def _background_wait(self, now: float) -> float:
        """The further wait of a background call: its share of the window, and everyone else first."""
        while self._background_sent and self._background_sent[0] <= now - self.window_seconds:
            self._background_sent.popleft()
        waits = [_YIELD_SECONDS if self._waiting else 0.0, self._background_next - now]
        if len(self._background_sent) >= self.background_requests:
            oldest = self._background_sent[len(self._background_sent) - self.background_requests]
            waits.append(oldest + self.window_seconds - now)
        # What the provider says is left, once the others' calls this window are counted, is not
        # more than the others' part: someone else (the dashboard, another installation) spent ours.
        others_left = self.requests - self.background_requests - (len(self._sent) - len(self._background_sent))
        if self._remaining is not None and now < self._remaining_until and self._remaining <= others_left:
            waits.append(self._remaining_until - now)
        return max(waits)

    async def acquire(self) -> None:
        """Take one call from the budget, waiting briefly if that is enough.

        A longer wait is not worth holding a request open for: ``ProviderBusy`` tells the caller
        when to come back, and nothing is taken from the budget.
        """
        background = BACKGROUND.get()
        longest = min(BACKGROUND_MAX_WAIT, self.window_seconds) if background else self.max_wait_seconds
        while True:
            now = self._monotonic()
            wait = self._wait(now)
            if background:
                wait = max(wait, self._background_wait(now))
            if wait <= 0 and self.shared is not None:
                wait = await self.shared.take(background=background)
                now = self._monotonic()
            if wait <= 0:
                self._sent.append(now)
                if background:
                    self._background_sent.append(now)
                    # On a grid of window / share: a call that went a little late (the event loop
                    # was busy) does not push every later one back; after an idle spell, two may go.
                    spacing = self.window_seconds / self.background_requests
                    self._background_next = max(self._background_next, now - spacing) + spacing
                if self._remaining is not None:
                    self._remaining -= 1
                return
            if wait > longest:
                # Rounded first: (now + 30) - now can be 30.000000000004 in floats, which is not 31 s.
                raise ProviderBusy(math.ceil(round(wait, 3)))
            if background:
                await self._sleep(wait)
                continue
            self._waiting += 1
            try:
                await self._sleep(wait)  # then look again: another caller may have taken the slot
            finally:
                self._waiting -= 1

    async def tell_others(self, retry_after: float | None) -> None:
        """The provider's ``Retry-After`` holds for every process sharing the budget."""
        if self.shared is not None and retry_after is not None and retry_after > 0:
            await self.shared.block(retry_after)

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
