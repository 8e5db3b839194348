"""Zones whose DNS did not answer a background check, remembered for a few minutes.

A zone whose nameservers never answer (a lame delegation, a DNS host that is down) costs each
check of each of its hostnames the whole DNS timeout, several times over (the records, the walk
to the zone, its nameservers). One workspace's thousands of hostnames there would keep the
watcher's slots busy doing nothing. So the first background check that finds the zone not
answering marks that zone (core/verification/checks.py, ``VerifyResult.silent_zone``: the lame
zone itself, not its registrable domain, whose other zones answer) for ``quiet_seconds``, and the
background checks of the hostnames at or below it wait until then. A check a person asks for
always runs. One lookup that missed its time while the zone's nameservers answer marks nothing:
it is asked again soon (core/lifecycle/watcher.py).

Kept per process, in memory: another process finds the same out with one check of its own.
"""

from __future__ import annotations

from core.clock import Clock
from core.config import LifecycleConfig

#: How long a zone that did not answer is left alone by the background checks, in
#: ``[lifecycle] interval_seconds``: five minutes at the default of 60.
QUIET_INTERVALS = 5
#: Zones remembered at most; expired ones are dropped first.
MAX_ZONES = 10_000


def quiet_seconds(config: LifecycleConfig) -> float:
    return QUIET_INTERVALS * config.interval_seconds


class QuietZones:
    def __init__(self, clock: Clock, seconds: float) -> None:
        self.clock = clock
        self.seconds = seconds
        self._until: dict[str, float] = {}

    def mark(self, zone: str) -> None:
        """A check found ``zone``'s nameservers not answering."""
        now = self.clock.timestamp()
        if len(self._until) >= MAX_ZONES:
            self._until = {zone: until for zone, until in self._until.items() if until > now}
            if len(self._until) >= MAX_ZONES:
                return  # remembering is an economy, never a duty
        self._until[zone.lower().rstrip(".")] = now + self.seconds

    def wait(self, apex: str) -> float | None:
        """Seconds until ``apex``'s zone (any quiet zone at or above it) may be asked again; None
        when it may be now."""
        if not self._until:
            return None
        now = self.clock.timestamp()
        labels = apex.lower().rstrip(".").split(".")
        left = 0.0
        for i in range(len(labels) - 1):  # the top-level domain is never marked
            zone = ".".join(labels[i:])
            until = self._until.get(zone)
            if until is None:
                continue
            if until > now:
                left = max(left, until - now)
            else:
                del self._until[zone]
        return left or None
