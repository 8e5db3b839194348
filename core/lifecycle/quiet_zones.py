"""Zones whose DNS did not answer a background check, remembered for a few minutes.

A zone whose nameservers never answer (a lame delegation, a DNS host that is down) costs each
check of each of its hostnames the whole DNS timeout, several times over (the records, the walk
to the zone, its nameservers). One workspace's thousands of hostnames there would keep the
watcher's slots busy doing nothing. So the first background check that gets no answer marks the
hostname's registrable domain (the zone most customers manage) for ``QUIET_SECONDS``, and the
background checks of its other hostnames wait until then. A check a person asks for always runs.

Kept per process, in memory: another process finds the same out with one check of its own.
"""

from __future__ import annotations

from core.clock import Clock
from core.hostnames import zone_of

#: How long a zone that did not answer is left alone by the background checks.
QUIET_SECONDS = 300.0
#: Zones remembered at most; expired ones are dropped first.
MAX_ZONES = 10_000


class QuietZones:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._until: dict[str, float] = {}

    def mark(self, apex: str) -> None:
        """A check of ``apex`` got no answer from its zone's DNS."""
        now = self.clock.timestamp()
        if len(self._until) >= MAX_ZONES:
            self._until = {zone: until for zone, until in self._until.items() if until > now}
            if len(self._until) >= MAX_ZONES:
                return  # remembering is an economy, never a duty
        self._until[zone_of(apex)] = now + QUIET_SECONDS

    def wait(self, apex: str) -> float | None:
        """Seconds until ``apex``'s zone may be asked again; None when it may be now."""
        zone = zone_of(apex)
        left = self._until.get(zone, 0.0) - self.clock.timestamp()
        if left > 0:
            return left
        self._until.pop(zone, None)
        return None
