"""Where a domain's DNS is hosted, found from its zone's NS records, and what that DNS host
offers: the names of our records as its panel wants them typed, and one-click set-up.

The zone comes from the walk the diagnosis and a failed check already make (core/dns/authority.py),
so knowing the host costs no lookup of its own there; the check that verifies a domain walks once
more, so a delegation changed before the records were published is not kept. Pages for a domain still waiting for its
records look when nothing is known yet, or what is known is a day old: DNS hosts change rarely,
and a customer moving the zone mid-onboarding gets the new host's wording the next day, or at the
next check that finds a record missing.

What the zone's DNS host offers for one-click set-up changes more often (a template deployed, a
settings endpoint down for a minute), so pages and the button ask the discovery again each time;
it keeps each zone's answer for ``[domain_connect] cache_seconds`` (a minute when unanswered), and
an unanswered discovery takes nothing away from what was found before; with nothing found
before, the offer is kept as unknown (``offer_unknown``), never as "not offered".

The background checks never ask the discovery (they note the DNS host from the NS records only):
a bulk of hostnames created in zones made for the purpose would otherwise send the service's
requests, unasked by anyone, to wherever those zones point. A person looking (a page, a check
they asked for, a diagnosis, the button) asks, within their workspace's limits
(core/domain_connect/limits.py).

What is found is kept on the domain (``dns_host``), so reading a domain never waits on DNS or on a
DNS host's servers.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING

import attrs

from core.dns.authority import Walk
from core.domains import dns_hosts
from core.domains.dns_host_view import needs_records
from core.errors import StorageUnavailable
from core.hostnames import zone_of
from store.records import DnsHostSeen, DomainRow, OneClickOffer

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)
#: What is known of a domain's DNS host is looked at again after this long.
FRESH_FOR = dt.timedelta(days=1)
#: A page view that found no zone (a name not in DNS yet, resolvers not answering) is not repeated
#: for this long, per domain and process: each would make the page wait on the same lookups again.
NOT_FOUND_FOR = 600.0
_not_found: OrderedDict[uuid.UUID, float] = OrderedDict()


def stale(row: DomainRow, now: dt.datetime) -> bool:
    """Nothing is known of the domain's DNS host, or it was found over a day ago."""
    return row.dns_host is None or now - row.dns_host.checked_at > FRESH_FOR


def to_look_at(row: DomainRow, walk: Walk, now: dt.datetime, *, asked: bool) -> bool:
    """A check that walked to the zone (a record missing, or both found for a domain not verified
    yet) looks at the DNS host: when ``stale``; when the walk found another zone or host than the
    one kept (a sub-zone delegated or un-delegated, the zone moved to another DNS host); or when a
    person asked for the check and what the host offers is not known (a background check did not ask)."""
    if stale(row, now):
        return True
    assert row.dns_host is not None  # not stale
    if asked and row.dns_host.offer_unknown:
        return True
    zone = walk.zone
    if zone is None or not _own_zone(row.apex, zone.name):
        return False
    host = dns_hosts.identify(zone.nameservers)
    return (zone.name, host.key if host else "") != (row.dns_host.zone, row.dns_host.host)


def _own_zone(apex: str, zone: str) -> bool:
    """The zone is the registrable domain or below it: a walk that ended on a public suffix (the
    customer's own domain not answering) found no zone of the customer's."""
    registrable = zone_of(apex)
    return zone == registrable or zone.endswith("." + registrable)


@attrs.frozen
class _Offered:
    offer: OneClickOffer | None
    problem: str | None
    "Why the zone's settings were ignored, if they were."
    unknown: bool = False


async def _offer(services: Services, row: DomainRow, zone: str, *, discover: bool = True) -> _Offered:
    """What the zone's DNS host offers now (what was known, when not ``discover``)."""
    previous = row.dns_host
    known = _Offered(previous.offer, previous.problem, previous.offer_unknown) \
        if previous is not None and previous.zone == zone else _Offered(None, None, unknown=True)
    if services.domain_connect is None:
        return _Offered(None, None)
    if not discover:
        return known
    found = await services.domain_connect.discover(zone, workspace=row.workspace_id)
    if found.outcome == "unknown":
        return known  # a passing failure takes nothing away, and adds nothing
    offer = None
    if found.offer is not None:
        offer = OneClickOffer(provider_id=found.offer.provider_id, provider_name=found.offer.provider_name,
                              url_sync_ux=found.offer.url_sync_ux, width=found.offer.width, height=found.offer.height)
    return _Offered(offer, found.problem if found.outcome == "ignored" else None)


async def seen(services: Services, row: DomainRow, walk: Walk, *, discover: bool = True) -> DnsHostSeen | None:
    """What the walk's zone says of the domain's DNS host; None when the walk found no zone of its
    own. ``discover=False`` (a background check) asks no DNS host's server what it offers."""
    zone = walk.zone
    if zone is None or not _own_zone(row.apex, zone.name):
        return None
    host = dns_hosts.identify(zone.nameservers)
    offered = await _offer(services, row, zone.name, discover=discover)
    return DnsHostSeen(zone=zone.name, host=host.key if host else "", checked_at=services.clock.now(),
                       offer=offered.offer, problem=offered.problem, offer_unknown=offered.unknown)


def keep(services: Services, row: DomainRow, found: DnsHostSeen | None) -> DomainRow:
    """The domain with what was found, stored in its own short write (re-read inside it). A page
    showing the domain still renders when the database cannot be written: it is only not kept.
    A unit of work (``store.run``); ``kept`` is its async form."""
    if found is None:
        return row
    try:
        with services.store.transaction():
            current = services.store.domains.get(row.workspace_id, row.id)
            if current is None:  # deleted meanwhile
                return row
            updated = attrs.evolve(current, dns_host=found)
            services.store.domains.update(updated)
            return updated
    except StorageUnavailable:
        return attrs.evolve(row, dns_host=found)


async def kept(services: Services, row: DomainRow, found: DnsHostSeen | None) -> DomainRow:
    """``keep`` in a unit of work; nothing found costs no unit."""
    return row if found is None else await services.store.run(keep, services, row, found)


async def locate(services: Services, row: DomainRow, *, walk: Walk | None = None) -> DomainRow:
    """The domain with its DNS host found now (walking to its zone unless ``walk`` is given)."""
    walk = walk or await services.authority.walk(row.apex)
    found = await seen(services, row, walk)
    if found is not None and row.dns_host is not None and row.dns_host.host != found.host:
        log.info("%s: DNS host now %s (was %s)", row.apex, found.host or "unknown", row.dns_host.host or "unknown")
    return await kept(services, row, found)


async def freshened(services: Services, row: DomainRow) -> DomainRow:
    """The domain, its DNS host looked up first when a page about publishing its records needs it,
    and what that host offers asked again (cached per zone)."""
    if not needs_records(row):
        return row
    now = services.clock.timestamp()
    if stale(row, services.clock.now()):
        if _not_found.get(row.id, -NOT_FOUND_FOR) > now - NOT_FOUND_FOR:
            return row
        found = await locate(services, row)
        if found.dns_host is None or found.dns_host is row.dns_host:
            _not_found[row.id] = now
            _not_found.move_to_end(row.id)
            if len(_not_found) > 10_000:
                _not_found.popitem(last=False)
        return found
    assert row.dns_host is not None  # not stale
    offered = await _offer(services, row, row.dns_host.zone)
    if (offered.offer, offered.problem, offered.unknown) == (row.dns_host.offer, row.dns_host.problem,
                                                             row.dns_host.offer_unknown):
        return row
    return await kept(services, row, attrs.evolve(row.dns_host, offer=offered.offer, problem=offered.problem,
                                                  offer_unknown=offered.unknown))
