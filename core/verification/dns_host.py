"""Where a domain's DNS is hosted, found from its zone's NS records, and what that DNS host
offers: the names of our records as its panel wants them typed, and one-click set-up.

The zone comes from the walk the diagnosis and a failed check already make (core/dns/authority.py),
so knowing the host costs no lookup of its own there. Pages for a domain still waiting for its
records look when nothing is known yet, or what is known is a day old: DNS hosts change rarely,
and a customer moving the zone mid-onboarding gets the new host's wording the next day, or at the
next check that finds a record missing.

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

from core import dns_hosts
from core.dns.authority import Walk
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


async def seen(services: Services, walk: Walk) -> DnsHostSeen | None:
    """What the walk's zone says of its DNS host; None when the walk found no zone."""
    zone = walk.zone
    if zone is None:
        return None
    host = dns_hosts.identify(zone.nameservers)
    offer, problem = None, None
    if services.domain_connect is not None:
        found = await services.domain_connect.discover(zone.name)
        if found.offer is not None:
            offer = OneClickOffer(provider_id=found.offer.provider_id, provider_name=found.offer.provider_name,
                                  url_sync_ux=found.offer.url_sync_ux, width=found.offer.width, height=found.offer.height)
        if found.outcome == "ignored":
            problem = found.problem
    return DnsHostSeen(zone=zone.name, host=host.key if host else "", checked_at=services.clock.now(),
                       offer=offer, problem=problem)


def keep(services: Services, workspace_id: uuid.UUID, domain_id: uuid.UUID, found: DnsHostSeen | None) -> DomainRow | None:
    """Store what was found on the domain (in its own short write); the domain as it is now."""
    with services.store.transaction():
        current = services.store.domains.get(workspace_id, domain_id)
        if current is None or found is None:
            return current
        updated = attrs.evolve(current, dns_host=found)
        services.store.domains.update(updated)
        return updated


async def locate(services: Services, row: DomainRow, *, walk: Walk | None = None) -> DomainRow:
    """The domain with its DNS host found now (walking to its zone unless ``walk`` is given)."""
    walk = walk or await services.authority.walk(row.apex)
    found = await seen(services, walk)
    if found is None:
        return row
    if row.dns_host is not None and row.dns_host.host != found.host:
        log.info("%s: DNS host now %s (was %s)", row.apex, found.host or "unknown", row.dns_host.host or "unknown")
    return keep(services, row.workspace_id, row.id, found) or row


async def freshened(services: Services, row: DomainRow) -> DomainRow:
    """The domain, its DNS host looked up first when a page about publishing its records needs it."""
    if row.validation_status == "verified" and not row.drift:
        return row
    now = services.clock.timestamp()
    if not stale(row, services.clock.now()) or _not_found.get(row.id, -NOT_FOUND_FOR) > now - NOT_FOUND_FOR:
        return row
    found = await locate(services, row)
    if found.dns_host is None or found.dns_host is row.dns_host:
        _not_found[row.id] = now
        _not_found.move_to_end(row.id)
        if len(_not_found) > 10_000:
            _not_found.popitem(last=False)
    return found
