"""Two questions c-ares cannot ask a resolver, asked with dnspython: the same query with DNSSEC
checking disabled (the CD bit), and what a negative answer's authority section says.

- A validating resolver answers SERVFAIL both when the zone's servers fail and when the zone's
  DNSSEC does not validate (expired signatures, a DS record matching no key). Asked again with CD,
  it answers the second case from the zone: an answer then means DNSSEC, and the fix is the zone's
  signatures, not patience.
- A resolver that cached "no such record" keeps saying so, after the record is published, for
  as long as the zone's SOA says (its TTL and minimum, whichever is lower). The SOA in a cached
  negative answer carries the time the resolver has left, counted down from its first negative
  answer: exactly when it will see the record.

Only the configured resolvers (or the system's) are asked, as by core/dns/lookups.py.

dnspython is imported by the functions that use it, when first asked: its import (with
importlib.metadata under it) was a tenth of the service's start-up, which no request waits for
since (issue 49).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from core.addresses import parse_nameserver
from core.dns.lookups import CaaRecord, DnsChecker, Lookup, Resolver

if TYPE_CHECKING:
    import dns.message


def servfail() -> str:
    """The words c-ares uses for a SERVFAIL, kept as an ``error`` lookup's detail by both paths, so a
    SERVFAIL is recognised the same way whichever asked. From c-ares when first asked: see core/dns/ares.py."""
    from core.dns.ares import SERVFAIL

    return SERVFAIL


def dnssec_fix(zone: str) -> str:
    """What to do about a zone whose DNSSEC does not validate, for the zone's administrator."""
    return (f"Check the DNSSEC of the zone {zone} (for example with dnsviz.net): re-sign the zone, or remove the DS "
            "record at the registrar if DNSSEC is not meant to be on.")


@attrs.frozen
class Probe:
    lookup: Lookup
    negative_ttl: int | None = None
    "For nxdomain and nodata: how many more seconds the resolver keeps that answer, when it says."
    zone: str | None = None
    "For nxdomain and nodata: the zone that said so (the owner of the SOA it carries)."


def is_servfail(lookup: Lookup) -> bool:
    return lookup.outcome == "error" and lookup.detail == servfail()


def system_nameservers() -> list[str]:
    """The system's resolvers (/etc/resolv.conf), for when ``[dns] nameservers`` is empty."""
    import dns.exception
    import dns.resolver

    try:
        return [str(ns) for ns in dns.resolver.Resolver(configure=True).nameservers]
    except dns.exception.DNSException:
        return []


def _first_server(resolver: Resolver) -> str | None:
    """The resolver c-ares asks first; None for the development DNS simulation, which has no DNSSEC
    and no cache."""
    if not isinstance(resolver, DnsChecker):
        return None
    servers = resolver.nameservers or system_nameservers()
    return servers[0] if servers else None


async def unchecked(resolver: Resolver, lookup: Lookup) -> Lookup | None:
    """For a SERVFAIL ``lookup``: the resolver's answer with DNSSEC checking disabled, when it gives
    one. Then DNSSEC validation is why it failed."""
    server = _first_server(resolver)
    if server is None or not is_servfail(lookup):
        return None
    probe = await ask(server, lookup.name, lookup.rtype, timeout=resolver.timeout, checking_disabled=True)
    return probe.lookup if probe.lookup.outcome in ("found", "nxdomain", "nodata") else None


async def negative_ttl(resolver: Resolver, lookup: Lookup) -> int | None:
    """For an nxdomain or nodata ``lookup``: how many more seconds the resolver keeps saying so."""
    server = _first_server(resolver)
    if server is None or lookup.outcome not in ("nxdomain", "nodata"):
        return None
    probe = await ask(server, lookup.name, lookup.rtype, timeout=resolver.timeout)
    return probe.negative_ttl if probe.lookup.outcome == lookup.outcome else None


async def ask(server: str, name: str, rtype: str, *, timeout: float, checking_disabled: bool = False) -> Probe:
    """Ask ``server`` (``ip`` or ``ip:port``, as ``[dns] nameservers`` takes it); never raises."""
    import dns.asyncquery
    import dns.exception
    import dns.flags
    import dns.message

    host, port = parse_nameserver(server)
    query = dns.message.make_query(name, rtype)
    if checking_disabled:
        query.flags |= dns.flags.CD
    try:
        response, _ = await dns.asyncquery.udp_with_fallback(query, host, timeout=timeout, port=port)
    except dns.exception.Timeout:
        return Probe(Lookup(name=name, rtype=rtype, outcome="timeout"))
    except (OSError, dns.exception.DNSException) as exc:
        return Probe(Lookup(name=name, rtype=rtype, outcome="error", detail=str(exc) or type(exc).__name__))
    return _read(response, name, rtype)


def _read(response: dns.message.Message, name: str, rtype: str) -> Probe:
    import dns.rcode
    import dns.rdatatype

    rcode = response.rcode()
    if rcode == dns.rcode.SERVFAIL:
        return Probe(Lookup(name=name, rtype=rtype, outcome="error", detail=servfail()))
    if rcode not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
        return Probe(Lookup(name=name, rtype=rtype, outcome="error", detail=str(dns.rcode.to_text(rcode))))
    wanted = dns.rdatatype.from_text(rtype)
    answers = [rrset for rrset in response.answer if rrset.rdtype == wanted]
    if rcode == dns.rcode.NOERROR and answers:
        values: list[str] = []
        caa: list[CaaRecord] = []
        for rrset in answers:
            for rdata in rrset:
                if wanted == dns.rdatatype.TXT:
                    values.append(b"".join(rdata.strings).decode("utf-8", "replace"))
                elif wanted == dns.rdatatype.CAA:
                    caa.append(CaaRecord(flags=rdata.flags, tag=rdata.tag.decode().lower(),
                                         value=rdata.value.decode("utf-8", "replace")))
                    values.append(str(caa[-1]))
                else:
                    values.append(rdata.to_text().rstrip("."))
        ttl = min(rrset.ttl for rrset in answers)
        return Probe(Lookup(name=name, rtype=rtype, outcome="found", values=tuple(values), caa=tuple(caa), ttl=ttl))
    soa = [rrset for rrset in response.authority if rrset.rdtype == dns.rdatatype.SOA]
    negative_ttl = min(soa[0].ttl, soa[0][0].minimum) if soa else None
    negative = Lookup(name=name, rtype=rtype, outcome="nxdomain" if rcode == dns.rcode.NXDOMAIN else "nodata")
    return Probe(negative, negative_ttl, soa[0].name.to_text().rstrip(".").lower() if soa else None)


async def zone_negative_ttl(resolver: Resolver, zone: str) -> int | None:
    """How long a resolver keeps a "no such record" answer from ``zone`` (RFC 2308: its SOA's TTL
    and minimum, the lower), as the resolver reads the zone's SOA; None when it does not say."""
    server = _first_server(resolver)
    if server is None:
        return None
    found = (await ask(server, zone, "SOA", timeout=resolver.timeout)).lookup
    if found.outcome != "found" or not found.values:
        return None
    try:
        minimum = int(found.values[0].split()[-1])
    except ValueError:
        return None
    return min(found.ttl, minimum) if found.ttl is not None else minimum


async def ask_resolver(resolver: Resolver, name: str, rtype: str) -> Probe | None:
    """``rtype`` at ``name`` asked of the resolver c-ares asks first, with what a negative answer's
    authority section says (``Probe.zone``); None for the development DNS simulation."""
    server = _first_server(resolver)
    return None if server is None else await ask(server, name, rtype, timeout=resolver.timeout)
