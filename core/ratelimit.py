"""Fixed-window rate limits per client IP, with the IETF RateLimit header fields.

On SQLite the counters live in memory: the service is one process, a restart forgets at most one
window of counts, and an admission check never waits on the disk; that limiter cannot fail, so
there is no fail-open or fail-closed choice to make. On PostgreSQL every process counts in the
same table (store/shared.py), one statement per request in a unit of work, so a client cannot
double its limit by alternating between processes; with the database unreachable the request
fails with 503 like any other that needs it.

Buckets (the spec's Limits table): every ``/v1/`` request counts against ``api`` except sign-up,
which has its own separate bucket; ``/v1/auth/*``, the two verification-link families and the
site scan are counted in their own bucket as well, within the shared one.
"""

from __future__ import annotations

import functools
import ipaddress
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from core.clock import Clock
from core.config import RateLimitsConfig

if TYPE_CHECKING:
    from store import Store

_ROUTE_BUCKETS = (
    ("/v1/public/signup", ("signup",)),
    ("/v1/auth/", ("api", "auth")),
    ("/v1/public/verification-links/", ("api", "public_verification_links")),
    ("/v1/verification-links", ("api", "verification_links")),
    ("/v1/site-scan/", ("api", "site_scan")),
    ("/v1/", ("api",)),
)


_PREFIXES = tuple((prefix, prefix.rstrip("/"), buckets) for prefix, buckets in _ROUTE_BUCKETS)


def buckets_for(path: str) -> tuple[str, ...]:
    """The buckets a request path counts against, shared one first."""
    for prefix, bare, buckets in _PREFIXES:
        if path.startswith(prefix) or path == bare:
            return buckets
    return ()


def client_ip(peer: str, forwarded_for: str | None, trusted: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> str:
    """The client address: the socket peer, unless it is a trusted proxy.

    Behind trusted proxies, X-Forwarded-For is read right to left and the first hop that is not
    a trusted proxy is the client; anything further left was written by the client and is not
    believed.
    """

    def is_trusted(address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in trusted)

    if not forwarded_for or not is_trusted(peer):
        return peer
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        if not is_trusted(hop):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return peer  # a malformed hop: fall back to what we know
    return hops[0] if hops else peer


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@functools.lru_cache(maxsize=4096)
def _partition(address: str) -> str:
    """IPv6 clients are counted per /64, since one host commonly holds a whole /64; but an IPv4
    client seen over IPv6 (IPv4-mapped through a dual-stack proxy, or NAT64) is its IPv4 address,
    or every such client would share one bucket."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        if ip in _NAT64:
            return str(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class Usage(NamedTuple):
    bucket: str
    quota: int
    remaining: int
    reset: int
    "Seconds until the window ends (at least 1)."


class Decision(NamedTuple):
    """One request's standing in its buckets (tuples: built on every request, cheaply)."""

    window: int
    usages: tuple[Usage, ...]
    policy: str
    "The RateLimit-Policy field, the same for every request to the same buckets."
    exceeded: Usage | None = None

    def policy_header(self) -> str:
        return self.policy

    def limit_header(self) -> str:
        """The policy closest to exhaustion (the draft allows reporting only that one)."""
        tightest = self.exceeded or min(self.usages, key=lambda u: u.remaining)
        return f'"{tightest.bucket}";r={tightest.remaining};t={tightest.reset}'


class RateLimiter:
    def __init__(self, config: RateLimitsConfig, clock: Clock, store: Store | None = None) -> None:
        self.config = config
        self.clock = clock
        self.store = store if store is not None and store.pg is not None else None
        "The store whose counters every process shares (PostgreSQL); None: counted here."
        self._window_index = -1
        self._counts: dict[tuple[str, str], int] = {}
        self._buckets: dict[tuple[str, ...], tuple[tuple[tuple[str, int], ...], str]]
        window = config.window_seconds
        self._buckets = {
            buckets: (tuple((bucket, getattr(config, bucket)) for bucket in buckets),
                      ", ".join(f'"{bucket}";q={getattr(config, bucket)};w={window}' for bucket in buckets))
            for _, buckets in _ROUTE_BUCKETS
        }

    async def admit(self, path: str, client: str) -> Decision | None:
        """Count one request; ``None`` for paths outside every bucket."""
        if self.store is None:
            return self.hit(path, client)
        if not buckets_for(path):
            return None
        return await self.store.run(self.hit, path, client)

    def hit(self, path: str, client: str) -> Decision | None:
        """``admit`` here and now: in memory, or in the shared table within a unit of work."""
        buckets = buckets_for(path)
        if not buckets:
            return None
        quotas, policy = self._buckets[buckets]
        window = self.config.window_seconds
        now = self.clock.timestamp()
        index = int(now // window)
        if index != self._window_index:
            # Fixed windows: a new window starts every counter afresh.
            self._window_index, self._counts = index, {}
            if self.store is not None:
                self.store.shared.forget_windows(before=index - 1)
        reset = max(1, math.ceil((index + 1) * window - now))
        key = _partition(client)
        counts = self._counts
        usages = []
        exceeded = None
        for bucket, quota in quotas:
            if self.store is not None:  # a request refused by one bucket is not counted by the next
                shared = self.store.shared
                count = shared.count_hit(bucket, key, index) if exceeded is None else shared.hits(bucket, key, index)
            else:
                count = counts.get((bucket, key), 0)
                if exceeded is None:
                    count += 1
                    counts[(bucket, key)] = count
            usage = Usage(bucket, quota, quota - count if count < quota else 0, reset)
            if exceeded is None and count > quota:
                exceeded = usage
            usages.append(usage)
        return Decision(window, tuple(usages), policy, exceeded)
