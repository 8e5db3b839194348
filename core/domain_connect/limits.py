"""How much Domain Connect discovery one workspace may ask for, and how hard one destination is asked.

Discovery fetches URLs chosen by whoever holds a zone, on a pool of 8 connections of its own
(core/runtime/assembly.py). Without limits, one workspace could hold that pool with slow zones
(every other workspace's discoveries then wait and time out), and a bulk of hostnames in zones
made for the purpose would turn the service into a source of requests to a host and port of the
attacker's choosing. So:

- a workspace has at most ``WORKSPACE_AT_ONCE`` discoveries under way (a quarter of the pool) and
  starts at most ``WORKSPACE_PER_MINUTE`` a minute; an answer from the cache, or a discovery of a
  zone another caller started, costs nothing;
- one destination (the host and port of a settings or template-check URL) gets at most
  ``DESTINATION_AT_ONCE`` requests at once and ``DESTINATION_PER_MINUTE`` a minute, all
  workspaces together.

A discovery refused by a limit is ``unknown`` and not cached: it is asked again at the next look.
The counts are per process (docs/operating/postgresql.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

from core.clock import Clock

WORKSPACE_AT_ONCE = 2
WORKSPACE_PER_MINUTE = 20
DESTINATION_AT_ONCE = 4
DESTINATION_PER_MINUTE = 60
WINDOW_SECONDS = 60.0
#: Keys remembered before the ones with nothing under way or counted are swept out.
SWEEP_ABOVE = 10_000


class Limit:
    """At most ``at_once`` under way and ``per_window`` started within ``WINDOW_SECONDS``, per key."""

    def __init__(self, clock: Clock, *, at_once: int, per_window: int) -> None:
        self.clock = clock
        self.at_once = at_once
        self.per_window = per_window
        self._running: dict[Hashable, int] = {}
        self._started: dict[Hashable, deque[float]] = {}

    def take(self, key: Hashable) -> bool:
        """Start one for ``key`` if both limits allow it (then ``release`` it when done)."""
        now = self.clock.timestamp()
        started = self._recent(key, now)
        if self._running.get(key, 0) >= self.at_once or len(started) >= self.per_window:
            return False
        if len(self._started) > SWEEP_ABOVE:
            self._sweep(now)
        self._started.setdefault(key, started).append(now)
        self._running[key] = self._running.get(key, 0) + 1
        return True

    def release(self, key: Hashable) -> None:
        left = self._running.pop(key, 1) - 1
        if left > 0:
            self._running[key] = left

    def _recent(self, key: Hashable, now: float) -> deque[float]:
        started = self._started.get(key, deque())
        while started and started[0] <= now - WINDOW_SECONDS:
            started.popleft()
        return started

    def _sweep(self, now: float) -> None:
        for key in list(self._started):
            if not self._recent(key, now) and key not in self._running:
                del self._started[key]
