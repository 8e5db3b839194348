"""DEVELOPMENT ONLY: a DNS that publishes every domain's two records by itself.

With ``[provider.sandbox] simulate_dns = true`` (refused at start-up unless the provider is the
sandbox), verification looks records up here instead of in the real DNS: once a domain is
``simulate_dns_delay_seconds`` old, its delegation CNAME and ownership TXT "exist" with exactly
the values the service asked for. A new user can then see sign-up, verification and an active
(simulated) certificate without owning a domain. Nothing real is ever verified this way.

With ``[domain_connect] simulate = true`` it holds instead only what the stand-in DNS host applied
(core/domain_connect/simulated.py), and nothing appears by itself: a domain's records exist once
its one-click set-up was approved there, as at a real DNS host.
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

    def __init__(self, store: Store, clock: Clock, *, delay_seconds: float, host_applies: bool = False) -> None:
        self.store = store
        self.clock = clock
        self.delay = dt.timedelta(seconds=delay_seconds)
        self.host_applies = host_applies
        "Only the records the simulated DNS host applied exist (``[domain_connect] simulate``)."
        log.warning(
            "DNS is SIMULATED ([provider.sandbox] simulate_dns = true): %s. Development only; never use this "
            "with real customers.",
            "a domain's records are published by one-click set-up at the simulated DNS host" if host_applies else
            f"every domain's records count as published {delay_seconds:g} s after it is created",
        )

    async def lookup(self, name: str, rtype: str) -> Lookup:
        """The records the service asked for, once the domain is old enough (or once the simulated DNS
        host applied them); NXDOMAIN otherwise."""
        name = name.rstrip(".").lower()
        if self.host_applies:
            applied = await self.store.run(self.store.stand_ins.records_at, name)
            if not applied:
                return Lookup(name=name, rtype=rtype, outcome="nxdomain")
            if rtype not in applied:
                return Lookup(name=name, rtype=rtype, outcome="nodata")
            return Lookup(name=name, rtype=rtype, outcome="found", values=(applied[rtype],))
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
