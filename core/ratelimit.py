"""Fixed-window rate limits per client IP, with the IETF RateLimit header fields.

On SQLite the counters live in memory: the service is one process, a restart forgets at most one
window of counts, and an admission check never waits on the disk; that limiter cannot fail, so
there is no fail-open or fail-closed choice to make.

On PostgreSQL every process counts in the same table (store/shared.py), so a client cannot double
its limit by alternating between processes. A process counts ahead: it adds a lease of several
requests to a client's shared count in one statement, then admits that many on the event loop
alone, one lease at a time per client and bucket. Leases start at one request and double with
each lease up to ``LEASE_MOST``, and never take more than ``1 / LEASE_SHARE`` of what is left, so
near the limit every request is counted in the table, and no process ever admits beyond the
quota. What a lease counted and this process did not use is lost for the window: a client moving
between processes may be refused up to one lease per process early. A bucket found full refuses
without a query until its window ends. With the database unreachable, a request that needs a
lease fails with 503 like any other that needs the database.

Buckets (the spec's Limits table): every ``/v1/`` request counts against ``api`` except sign-up,
which has its own separate bucket; ``/v1/auth/*``, the two verification-link families and the
site scan are counted in their own bucket as well, within the shared one.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import math
import operator
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


@functools.lru_cache(maxsize=4096)
def buckets_for(path: str) -> tuple[str, ...]:
    """The buckets a request path counts against, shared one first (a polled path: looked up once)."""
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

    def limit_header(self) -> str:
        """The policy closest to exhaustion (the draft allows reporting only that one)."""
        usages = self.usages
        tightest = self.exceeded or (usages[0] if len(usages) == 1 else min(usages, key=_remaining))
        return f'"{tightest.bucket}";r={tightest.remaining};t={tightest.reset}'


_remaining = operator.attrgetter("remaining")

#: The most requests a process counts ahead in one client's shared bucket (PostgreSQL).
LEASE_MOST = 64
#: A lease takes at most this fraction (1/n) of what is left of the bucket.
LEASE_SHARE = 8


class _Lease:
    """This process's standing in one client's shared bucket for the current window."""

    __slots__ = ("counted", "left", "pending", "size")

    def __init__(self) -> None:
        self.counted = 0
        "The bucket's shared count as of this process's last lease."
        self.left = 0
        "Requests counted ahead and not yet admitted."
        self.size = 1
        "The next lease's size, doubling with each lease up to LEASE_MOST."
        self.pending: asyncio.Future[None] | None = None
        "A lease being counted, which requests needing one wait for."

    def want(self, quota: int) -> int:
        return max(1, min(self.size, (quota - self.counted) // LEASE_SHARE))

    def full(self, quota: int) -> bool:
        return self.left == 0 and self.counted >= quota


class RateLimiter:
    def __init__(self, config: RateLimitsConfig, clock: Clock, store: Store | None = None) -> None:
        self.config = config
        self.clock = clock
        self.store = store if store is not None and store.pg is not None else None
        "The store whose counters every process shares (PostgreSQL); None: counted here."
        self.in_memory = self.store is None
        "Whether requests are counted here alone: then ``hit`` is ``admit``, without a coroutine."
        self._window_index = -1
        self._counts: dict[tuple[str, str], int] = {}
        self._leases: dict[tuple[str, str], _Lease] = {}
        self._forget_before: int | None = None
        "The windows the next lease drops from the shared table (PostgreSQL), set as windows turn."
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
        buckets = buckets_for(path)
        if not buckets:
            return None
        quotas, policy = self._buckets[buckets]
        key = _partition(client)
        while True:
            index, reset = self._window()
            wants: list[tuple[_Lease, str, int, int]] = []
            pending: list[asyncio.Future[None]] = []
            for bucket, quota in quotas:
                lease = self._leases.setdefault((bucket, key), _Lease())
                if lease.full(quota):
                    break  # refused here: the buckets after it are not counted
                if lease.left == 0:
                    if lease.pending is not None:
                        pending.append(lease.pending)  # one lease at a time: the others wait for it
                    else:
                        wants.append((lease, bucket, quota, lease.want(quota)))
            if wants:
                await self._count_ahead(key, index, wants)
            elif pending:
                await asyncio.wait(pending)
            else:
                return self._take(quotas, policy, key, index, reset)
            # The lease is in, or the window turned meanwhile, or requests admitted meanwhile used
            # it up: look again.

    async def _count_ahead(self, key: str, index: int, wants: list[tuple[_Lease, str, int, int]]) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for lease, *_ in wants:
            lease.pending = done
        forget, self._forget_before = self._forget_before, None
        try:
            counts = await self.store.run(self.lease, key, index, [(bucket, want) for _, bucket, _, want in wants],  # type: ignore[union-attr]
                                          forget)
        finally:
            for lease, *_ in wants:
                lease.pending = None
            done.set_result(None)  # the waiting requests look again (and count for themselves on an error)
        for (lease, _, quota, want), count in zip(wants, counts, strict=True):
            lease.left += max(0, min(want, quota - (count - want)))
            lease.counted = max(lease.counted, min(count, quota))  # leases refused past the quota count as the quota
            lease.size = min(LEASE_MOST, lease.size * 2)

    def lease(self, key: str, index: int, wants: list[tuple[str, int]], forget_before: int | None) -> list[int]:
        """Count ``want`` requests ahead in each bucket: each bucket's shared count now (a unit of work)."""
        shared = self.store.shared  # type: ignore[union-attr]
        if forget_before is not None:
            shared.forget_windows(before=forget_before)
        return [shared.count_hits(bucket, key, index, want) for bucket, want in wants]

    def _window(self) -> tuple[int, int]:
        """The current window's index and the seconds until it ends; a new window starts afresh."""
        window = self.config.window_seconds
        now = self.clock.timestamp()
        index = int(now // window)
        if index != self._window_index:
            self._window_index, self._counts, self._leases = index, {}, {}
            self._forget_before = index - 1
        return index, max(1, math.ceil((index + 1) * window - now))

    def _take(self, quotas: tuple[tuple[str, int], ...], policy: str, key: str, index: int, reset: int) -> Decision:
        """Admit one request from this process's leases, or refuse it at the first full bucket."""
        usages = []
        exceeded = None
        for bucket, quota in quotas:
            lease = self._leases.setdefault((bucket, key), _Lease())
            if exceeded is None and lease.left:
                lease.left -= 1
                usage = Usage(bucket, quota, max(0, quota - lease.counted + lease.left), reset)
            else:
                usage = Usage(bucket, quota, 0 if exceeded is None else max(0, quota - lease.counted + lease.left), reset)
                exceeded = exceeded or usage
            usages.append(usage)
        return Decision(self.config.window_seconds, tuple(usages), policy, exceeded)

    def hit(self, path: str, client: str) -> Decision | None:
        """``admit`` in memory, for the one process on SQLite."""
        buckets = buckets_for(path)
        if not buckets:
            return None
        quotas, policy = self._buckets[buckets]
        _, reset = self._window()
        key = _partition(client)
        counts = self._counts
        usages = []
        exceeded = None
        for bucket, quota in quotas:
            count = counts.get((bucket, key), 0)
            if exceeded is None:  # a request refused by one bucket is not counted by the next
                count += 1
                counts[(bucket, key)] = count
            usage = Usage(bucket, quota, quota - count if count < quota else 0, reset)
            if exceeded is None and count > quota:
                exceeded = usage
            usages.append(usage)
        return Decision(self.config.window_seconds, tuple(usages), policy, exceeded)
