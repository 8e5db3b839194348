"""Asking DNS the way a diagnosis needs: the zone's own (authoritative) nameservers, and each
configured resolver separately.

Verification asks the configured resolvers, as the certificate authority's resolvers would. When
that fails, the question is *why*: a record that is not published at all, or one that is published
but still hidden behind a resolver's cache, call for different fixes. The authoritative servers are
found by walking the delegation from the configured resolvers: the closest name at or above the
hostname that has NS records is the zone, and its nameservers' addresses come from the same
resolvers. They are then asked directly, on ``port`` (53; tests run them on loopback elsewhere).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import attrs

from core.config import DnsConfig
from core.dns import DnsChecker, Lookup, Resolver

#: Authoritative servers asked, at most: one that answers is enough, a second covers one that is down.
MAX_SERVERS = 2


@attrs.frozen
class Zone:
    name: str
    "The zone the hostname's records live in, e.g. ``example.com``."
    nameservers: tuple[str, ...]
    "Its NS names."
    servers: tuple[str, ...]
    "``address:port`` of the nameservers that will be asked."


class Authority:
    def __init__(self, config: DnsConfig, *, port: int = 53, simulated: Resolver | None = None,
                 observe: Callable[[Lookup], None] | None = None) -> None:
        self.config = config
        self.port = port
        "Where the zone's nameservers are asked (tests run them on loopback, on another port)."
        self.observe = observe
        self.resolvers = self._checker(config.nameservers)
        self.simulated = simulated
        "The development DNS simulation, when on: then it is the only resolver, and there is no zone to walk."

    def each_resolver(self) -> list[tuple[str, Resolver]]:
        """Every configured resolver on its own (``system resolver`` when none is configured)."""
        if self.simulated is not None:
            return [("simulated DNS", self.simulated)]
        if not self.config.nameservers:
            return [("system resolver", self.resolvers)]
        return [(ns, self._checker([ns])) for ns in self.config.nameservers]

    async def zone_of(self, hostname: str) -> Zone | None:
        """The zone holding ``hostname`` and how to reach its nameservers; None if DNS does not say."""
        if self.simulated is not None:
            return None
        labels = hostname.split(".")
        candidates = [".".join(labels[i:]) for i in range(len(labels) - 1)]  # never the TLD alone
        lookups = await self.resolvers.lookup_many([(name, "NS") for name in candidates])
        for name, lookup in zip(candidates, lookups):
            if lookup.outcome == "found":
                nameservers = tuple(sorted(lookup.values))[:MAX_SERVERS]
                found = await asyncio.gather(*(self.resolvers.addresses(ns) for ns in nameservers))
                servers = tuple(self._server(addresses[0]) for addresses, _ in found if addresses)
                return Zone(name=name, nameservers=tuple(sorted(lookup.values)), servers=servers)
        return None

    async def ask(self, zone: Zone, queries: list[tuple[str, str]]) -> tuple[str, list[Lookup]] | None:
        """The zone's own answers to ``queries``, from the first of its servers that answers them all."""
        for server in zone.servers:
            lookups = await self._checker([server]).lookup_many(queries)
            if not any(lookup.outcome in ("timeout", "error") for lookup in lookups):
                return server, lookups
        return None

    def _checker(self, nameservers: list[str]) -> DnsChecker:
        return DnsChecker(attrs.evolve(self.config, nameservers=nameservers), observe=self.observe)

    def _server(self, address: str) -> str:
        return f"[{address}]:{self.port}" if ":" in address else f"{address}:{self.port}"
