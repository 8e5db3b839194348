"""DEVELOPMENT ONLY: a DNS that publishes every domain's two records by itself.

With ``[provider.sandbox] simulate_dns = true`` (refused at start-up unless the provider is the
sandbox), verification looks records up here instead of in the real DNS: once a domain is
``simulate_dns_delay_seconds`` old, its delegation CNAME and ownership TXT "exist" with exactly
the values the service asked for. A new user can then see sign-up, verification and an active
(simulated) certificate without owning a domain. Nothing real is ever verified this way.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

from core.clock import Clock
from core.dns.lookups import Lookup
from core.domains.records import DELEGATION_PREFIX, OWNERSHIP_PREFIX, delegation_record, ownership_record
from store import Store

log = logging.getLogger(__name__)


class SimulatedDns:
    timeout = 0.0

    def __init__(self, store: Store, clock: Clock, *, delay_seconds: float) -> None:
        self.store = store
        self.clock = clock
        self.delay = dt.timedelta(seconds=delay_seconds)
        log.warning(
            "DNS is SIMULATED ([provider.sandbox] simulate_dns = true): every domain's records count as "
            "published %g s after it is created. Development only; never use this with real customers.",
            delay_seconds,
        )

    async def lookup(self, name: str, rtype: str) -> Lookup:
        """The records the service asked for, once the domain is old enough; NXDOMAIN otherwise."""
        name = name.rstrip(".").lower()
        for prefix, record_of, kind in (
            (DELEGATION_PREFIX, delegation_record, "CNAME"),
            (OWNERSHIP_PREFIX, ownership_record, "TXT"),
        ):
            if not name.startswith(prefix):
                continue
            found = await self.store.run(self.store.domains.with_apex, name[len(prefix):])
            rows = [r for r in found if self.clock.now() - r.created_at >= self.delay]
            values = tuple(dict.fromkeys(record_of(r).value for r in rows))
            if not values:
                break
            if rtype != kind:
                return Lookup(name=name, rtype=rtype, outcome="nodata")
            return Lookup(name=name, rtype=rtype, outcome="found", values=values)
        return Lookup(name=name, rtype=rtype, outcome="nxdomain")

    async def lookup_many(self, queries: list[tuple[str, str]]) -> list[Lookup]:
        return list(await asyncio.gather(*(self.lookup(name, rtype) for name, rtype in queries)))
