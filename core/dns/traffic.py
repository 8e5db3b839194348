"""Where a hostname's visitors go: the target customers point it at, and whether it points there.

Two records let a certificate be issued; neither sends a single visitor to the terminator that serves
it. ``[tls_terminator] traffic_cname`` and ``traffic_addresses`` say where customers point the name
itself (a CNAME to the terminator's name, or its A/AAAA addresses where a CNAME cannot be: at a
zone's apex). Both empty, nothing anywhere speaks of it. ``check`` is the DNS half of the HTTPS scan's
answer to "does this name reach our terminator?" (core/outbound/site_scan.py adds what it serves).

The scan answers anonymous callers, and the service's resolvers may see names the public cannot: so
what a name was found to lead to is told only when it has a public address, or leads to the target.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import attrs

from core import hostnames
from core.config import TlsTerminatorConfig
from core.dns import chain as cname_chain
from core.dns.lookups import Lookup, Resolver

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@attrs.frozen
class TrafficTarget:
    cname: str
    "The terminator's name in canonical form; empty when only addresses are configured."
    addresses: tuple[IPAddress, ...]

    @classmethod
    def from_config(cls, config: TlsTerminatorConfig) -> TrafficTarget | None:
        """None when neither key is set: then no record, page or scan mentions it."""
        if not config.traffic_cname and not config.traffic_addresses:
            return None
        cname = hostnames.canonical(config.traffic_cname) if config.traffic_cname else ""
        return cls(cname=cname, addresses=tuple(dict.fromkeys(ipaddress.ip_address(a) for a in config.traffic_addresses)))

    def wanted(self) -> str:
        """What the name should be, in words."""
        if not self.addresses:
            return f"a CNAME to {self.cname}"
        addresses = _listed([str(a) for a in self.addresses])
        if self.cname:
            return f"a CNAME to {self.cname} (at a zone's apex, the address records {addresses})"
        return f"the address records {addresses}"


@attrs.frozen
class TrafficFinding:
    reaches: bool | None
    "The name leads to the target; None when the DNS did not say (a lookup timed out or failed)."
    found: tuple[str, ...]
    "What it leads to, as may be told: the names of its CNAME chain, then its addresses."
    message: str


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _addresses(lookups: list[Lookup]) -> list[IPAddress]:
    found: list[IPAddress] = []
    for lookup in lookups:
        for value in lookup.values:
            try:
                found.append(ipaddress.ip_address(value))
            except ValueError:
                continue
    return list(dict.fromkeys(found))


async def check(resolver: Resolver, host: str, target: TrafficTarget, tellable: Callable[[IPAddress], bool]) -> TrafficFinding:
    """Whether ``host`` leads to ``target``: its CNAME chain reaches the target's name, or its addresses
    are the target's (configured, or those of the target's name: a flattened CNAME or an ALIAS at an
    apex). ``tellable`` says which addresses may be named to the caller (the outbound policy's)."""
    cname, a, aaaa = await resolver.lookup_many([(host, "CNAME"), (host, "A"), (host, "AAAA")])
    chain = None
    if cname.outcome == "found" and cname.values:
        chain = await cname_chain.follow(resolver, host, cname.values[0], target.cname or cname.values[0])
    addresses = _addresses([a, aaaa])
    own = [ip for ip in addresses if ip in target.addresses]
    public = [ip for ip in addresses if tellable(ip) or ip in target.addresses]
    via = tuple(chain.names[1:]) if chain is not None else ()
    shown_addresses = tuple(str(ip) for ip in public)
    reached_by_name = chain is not None and target.cname != "" and chain.end == "target"
    if reached_by_name:
        path = " → ".join(via)
        return TrafficFinding(True, via + shown_addresses, f"{host} points at our TLS terminator: a CNAME to {path}.")
    if addresses and len(own) == len(addresses):
        return TrafficFinding(True, via + shown_addresses, f"{host} points at our TLS terminator: it resolves to "
                              f"{_listed(list(shown_addresses))}, the terminator's {'address' if len(own) == 1 else 'addresses'}.")
    if addresses and target.cname:
        theirs = set(_addresses(await resolver.lookup_many([(target.cname, "A"), (target.cname, "AAAA")])))
        if all(ip in theirs for ip in addresses):
            return TrafficFinding(True, via + shown_addresses, f"{host} points at our TLS terminator: it resolves to "
                                  f"the addresses of {target.cname} (a flattened CNAME or an ALIAS record).")
    lookups = [cname, a, aaaa]
    if not addresses and any(lookup.outcome in ("timeout", "error") for lookup in lookups):
        failed = "timed out" if any(lookup.outcome == "timeout" for lookup in lookups) else "failed"
        return TrafficFinding(None, (), f"Whether {host} points at our TLS terminator could not be checked: the DNS "
                              f"lookup {failed}. It should be {target.wanted()}.")
    if public:
        now = (f"it is a CNAME to {' → '.join(via)} and resolves to {_listed(list(shown_addresses))}" if via
               else f"it resolves to {_listed(list(shown_addresses))}")
        found = via + shown_addresses
    else:  # what it leads to stays untold: it may be a name only the service's resolvers know
        now, found = ("it has no public address" if addresses else "it has no address records"), ()
    return TrafficFinding(False, found, f"{host} does not point at our TLS terminator: {now}. "
                          f"It should be {target.wanted()}.")
