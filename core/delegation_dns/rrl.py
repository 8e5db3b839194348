"""Response-rate limiting, as NSD's and Knot's RRL do it: the answers to each source prefix (/24
for IPv4, /56 for IPv6: one network, however many addresses it spoofs or holds) flow at most at
``[delegation_dns] rrl_responses_per_second``, from a bucket that holds one second of them. Past
that, every ``rrl_slip``-th answer goes out truncated (TC, no records: a real resolver asks again
over TCP, which a spoofed source cannot) and the others are dropped, so that the server is no
amplifier and one flood does not take the answers, or the CPU, of every other network.

UDP only: a TCP client has shown its address; its connections are capped instead (server.py).
"""

from __future__ import annotations

import enum
import socket
import time
from collections.abc import Callable

#: The IPv6 prefix a source is limited by, in bytes (/56, as Knot; IPv4's is /24, the first three numbers).
IPV6_PREFIX_BYTES = 7
#: Buckets kept before the idle ones (full: the same as none) are forgotten: random spoofed
#: sources grow the table by one per query.
MAX_BUCKETS = 65536


class Verdict(enum.Enum):
    ANSWER = "answer"
    SLIP = "slip"
    DROP = "drop"


class RateLimiter:
    """One token bucket per source prefix; ``rate`` 0 limits nothing."""

    def __init__(self, rate: int, slip: int, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.rate = float(rate)
        self.slip = slip
        self.monotonic = monotonic
        #: Per prefix: tokens left, when last counted, limited answers so far (for the slip).
        self._buckets: dict[object, list[float]] = {}

    def verdict(self, address: str) -> Verdict:
        """Whether to send the answer to ``address`` whole, truncated, or not at all."""
        if not self.rate:
            return Verdict.ANSWER
        key = prefix(address)
        now = self.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._forget_idle(now)
            self._buckets[key] = [self.rate - 1, now, 0]
            return Verdict.ANSWER
        tokens = min(self.rate, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        if tokens >= 1:
            bucket[0] = tokens - 1
            return Verdict.ANSWER
        bucket[0] = tokens
        bucket[2] += 1
        return Verdict.SLIP if self.slip and bucket[2] % self.slip == 0 else Verdict.DROP

    def _forget_idle(self, now: float) -> None:
        """Drop the buckets that filled up again (a second idle), or all of them if none did."""
        idle = [key for key, (_, last, _) in self._buckets.items() if now - last >= 1.0]
        if not idle:
            self._buckets.clear()
        for key in idle:
            del self._buckets[key]


def prefix(address: str) -> object:
    """The source prefix ``address`` (as asyncio gives it) is limited by."""
    if ":" not in address:
        return address.rpartition(".")[0]
    if "." in address:  # an IPv4 address mapped into IPv6 (a dual-stack socket)
        return address.rpartition(":")[2].rpartition(".")[0]
    try:
        return socket.inet_pton(socket.AF_INET6, address.partition("%")[0])[:IPV6_PREFIX_BYTES]
    except OSError:
        return address
