"""Asking DNS the way a diagnosis needs: the zone's own (authoritative) nameservers, and each
configured resolver separately.

Verification asks the configured resolvers, as the certificate authority's resolvers would. When
that fails, the question is *why*: a record that is not published at all, or one that is published
but still hidden behind a resolver's cache, call for different fixes. The authoritative servers are
found by walking the delegation from the configured resolvers: the closest name at or above the
hostname that has NS records is the zone, and its nameservers' addresses come from the same
resolvers. They are then asked directly, on ``port`` (53; tests run them on loopback elsewhere).

A step of the walk that no resolver answers (a timeout, SERVFAIL) ends it: whether that name is a
zone of its own is then unknown, and going on to the parent would ask the parent's servers, which
answer for a delegated child with a referral, not its records: every record would look missing.
The step is reported instead (``Walk.unanswered``), with the nearest name above it that did
answer (``Walk.parent``): when the zone's own servers are dead (a lame delegation), that parent's
servers still say, in their referral, which nameservers the zone was delegated to, and
``delegation`` asks each of them whether it answers (core/dns/delegation.py).

The nameservers' addresses come from DNS that whoever holds the zone controls, so each one must
pass the same address policy as a webhook or a scan before it is dialled (``allowed``): a zone
naming a private or loopback address as its nameserver must not turn a diagnosis into a query to
an internal server and an echo of its answers. Such nameservers are listed as refused, by name.

A step that a validating resolver answers SERVFAIL is asked again with DNSSEC checking disabled
(core/dns/probe.py). An answer then means the zone's DNSSEC is broken: the step is kept as
``Walk.bogus`` and the walk goes on with unchecked answers, so the zone's own servers can still
be asked and the diagnosis can say both what is published and why resolvers will not show it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import attrs

from core.config import DnsConfig
from core.dns.delegation import Delegation, check_server, referral
from core.dns.lookups import DnsChecker, Lookup, Resolver
from core.dns.probe import unchecked
from core.hostnames import zone_of

#: Authoritative servers asked, at most: one that answers is enough, a second covers one that is down.
MAX_SERVERS = 2
#: Nameservers of one zone checked for whether they answer, at most (a zone rarely lists more).
MAX_CHECKED = 4
#: The nameserver of every zone while the DNS host is simulated: a name that exists nowhere (RFC 6761).
SIMULATED_NAMESERVER = "ns.simulated-dns-host.invalid"


@attrs.frozen
class Zone:
    name: str
    "The zone the hostname's records live in, e.g. ``example.com``."
    nameservers: tuple[str, ...]
    "Its NS names."
    servers: tuple[str, ...]
    "``address:port`` of the nameservers that will be asked."


@attrs.frozen
class Walk:
    """What walking the delegation found."""

    zone: Zone | None
    "None when no name at or above the hostname has NS records, or when a step was not answered."
    unanswered: tuple[Lookup, ...] = ()
    "The NS or nameserver-address lookups no resolver answered (timeout, error): reported, never skipped."
    refused: tuple[str, ...] = ()
    "Nameservers not asked because no address of theirs is one the service may reach (by name only)."
    bogus: tuple[Lookup, ...] = ()
    "Steps the resolvers answered SERVFAIL and answered with DNSSEC checking disabled: DNSSEC fails there."
    parent: tuple[str, tuple[str, ...]] | None = None
    "Past an unanswered step: the nearest name above it the resolvers answered with NS, and those NS names."


class Authority:
    def __init__(self, config: DnsConfig, *, allowed: Callable[[str], bool], port: int = 53,
                 simulated: Resolver | None = None, simulated_host: bool = False,
                 observe: Callable[[Lookup], None] | None = None) -> None:
        self.config = config
        self.allowed = allowed
        "Whether a nameserver's address may be dialled: the outbound address policy."
        self.port = port
        "Where the zone's nameservers are asked (tests run them on loopback, on another port)."
        self.observe = observe
        self.resolvers = self._checker(config.nameservers)
        self.simulated = simulated
        "The development DNS simulation, when on: then it is the only resolver, and there is no zone to walk."
        self.simulated_host = simulated_host
        """With the simulated DNS host too (``[domain_connect] simulate``): every registrable domain is a
        zone of its own, at that host's nameserver, which no one asks."""

    def each_resolver(self) -> list[tuple[str, Resolver]]:
        """Every configured resolver on its own (``system resolver`` when none is configured)."""
        if self.simulated is not None:
            return [("simulated DNS", self.simulated)]
        if not self.config.nameservers:
            return [("system resolver", self.resolvers)]
        return [(ns, self._checker([ns])) for ns in self.config.nameservers]

    async def walk(self, hostname: str) -> Walk:
        """The zone holding ``hostname`` and how to reach its nameservers, or why it is not known."""
        if self.simulated is not None:
            return Walk(Zone(zone_of(hostname), (SIMULATED_NAMESERVER,), ()) if self.simulated_host else None)
        labels = hostname.split(".")
        candidates = [".".join(labels[i:]) for i in range(len(labels) - 1)]  # never the TLD alone
        lookups = await self.resolvers.lookup_many([(name, "NS") for name in candidates])
        bogus: list[Lookup] = []
        for step, (name, lookup) in enumerate(zip(candidates, lookups)):
            lookup = await self._validated_or_not(lookup, bogus)
            if _unanswered(lookup):  # not past it: see the module's docstring
                above = [(n, tuple(sorted(up.values))) for n, up in zip(candidates[step + 1:], lookups[step + 1:])
                         if up.outcome == "found"]
                return Walk(None, (lookup,), bogus=tuple(bogus), parent=above[0] if above else None)
            if lookup.outcome == "found":
                nameservers = tuple(sorted(lookup.values))
                asked = nameservers[:MAX_SERVERS]
                found = await asyncio.gather(*(self._addresses(ns, bogus) for ns in asked))
                servers, refused = [], []
                for ns, (addresses, _) in zip(asked, found):
                    reachable = [address for address in addresses if self.allowed(address)]
                    if reachable:
                        servers.append(self._server(reachable[0]))
                    elif addresses:
                        refused.append(ns)
                failed = tuple(step for addresses, steps in found if not addresses for step in steps if _unanswered(step))
                zone = Zone(name=name, nameservers=nameservers, servers=tuple(servers))
                return Walk(zone, failed, tuple(refused), tuple(bogus))
        return Walk(None, bogus=tuple(bogus))

    async def _validated_or_not(self, lookup: Lookup, bogus: list[Lookup]) -> Lookup:
        """``lookup``, or its answer without DNSSEC checking when only validation failed (noted in ``bogus``)."""
        answer = await unchecked(self.resolvers, lookup)
        if answer is None:
            return lookup
        bogus.append(lookup)
        return answer

    async def _addresses(self, nameserver: str, bogus: list[Lookup]) -> tuple[list[str], list[Lookup]]:
        addresses, steps = await self.resolvers.addresses(nameserver)
        if addresses:
            return addresses, steps
        steps = [await self._validated_or_not(step, bogus) for step in steps]
        return [value for step in steps if step.outcome == "found" for value in step.values], steps

    async def delegation(self, walk: Walk, hostname: str) -> Delegation | None:
        """How each of the zone's nameservers answers for it (core/dns/delegation.py): those the
        resolvers named, or, when the resolvers could not answer for the zone at all, those the
        parent zone's referral names. None when neither is known, or DNS is simulated."""
        if self.simulated is not None:
            return None
        if walk.zone is not None:
            return await self._checked(walk.zone.name, None, walk.zone.nameservers, {})
        if not walk.unanswered:
            return None
        parent = walk.parent or await self._top_level(hostname)
        if parent is None:
            return None
        name, nameservers = parent
        for ns in nameservers[:MAX_SERVERS]:
            address = await self._dialable(ns)
            found = await referral(address, self.port, hostname, self.config.timeout_seconds) if address else None
            if found is not None:
                return await self._checked(found.zone, name, found.nameservers, found.glue)
        return None

    async def _top_level(self, hostname: str) -> tuple[str, tuple[str, ...]] | None:
        """The top-level domain and its NS names: the parent of a zone right below it."""
        tld = hostname.rsplit(".", 1)[-1]
        lookup = await self.resolvers.lookup(tld, "NS")
        return (tld, tuple(sorted(lookup.values))) if lookup.outcome == "found" else None

    async def _dialable(self, nameserver: str, glue: tuple[str, ...] = ()) -> str | None:
        """The first address of ``nameserver`` (its glue, else looked up) that the policy lets us dial."""
        addresses = list(glue) or (await self.resolvers.addresses(nameserver))[0]
        return next((address for address in addresses if self.allowed(address)), None)

    async def _checked(self, zone: str, parent: str | None, nameservers: tuple[str, ...],
                       glue: dict[str, tuple[str, ...]]) -> Delegation:
        names = nameservers[:MAX_CHECKED]
        addresses = await asyncio.gather(*(self._dialable(ns, glue.get(ns, ())) for ns in names))
        checks = await asyncio.gather(*(check_server(ns, address, self.port, zone, self.config.timeout_seconds)
                                        for ns, address in zip(names, addresses) if address is not None))
        unasked = tuple(ns for ns, address in zip(names, addresses) if address is None)
        return Delegation(zone=zone, parent=parent, checks=tuple(checks), unasked=unasked)

    async def ask(self, zone: Zone, queries: list[tuple[str, str]]) -> tuple[str, list[Lookup]] | None:
        """The zone's own answers to ``queries``, from the first of its servers that answers them all."""
        for server in zone.servers:
            lookups = await self._checker([server]).lookup_many(queries)
            if not any(map(_unanswered, lookups)):
                return server, lookups
        return None

    def _checker(self, nameservers: list[str]) -> DnsChecker:
        return DnsChecker(attrs.evolve(self.config, nameservers=nameservers), observe=self.observe)

    def _server(self, address: str) -> str:
        return f"[{address}]:{self.port}" if ":" in address else f"{address}:{self.port}"


def _unanswered(lookup: Lookup) -> bool:
    return lookup.outcome in ("timeout", "error")
