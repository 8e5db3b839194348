"""A domain's two DNS records as a person reads them on the portal's DNS page and on the public
verification page: each host in full and relative to the zone, as DNS panels ask for it."""

from __future__ import annotations

import attrs

from core.domains.records import DnsRecord
from core.domains.shape import Validation
from core.hostnames import relative_name, zone_of


@attrs.frozen
class RecordView:
    """One DNS record, with the host both in full and as the customer's DNS panel asks for it."""

    type: str
    host: str
    relative_host: str
    value: str
    ttl: int


@attrs.frozen
class DnsInstructions:
    zone: str
    delegation: RecordView
    ownership: RecordView


def _view(record: DnsRecord, zone: str) -> RecordView:
    return RecordView(type=record.type, host=record.host, relative_host=relative_name(record.host, zone),
                      value=record.value, ttl=record.ttl)


def dns_instructions(apex: str, validation: Validation) -> DnsInstructions:
    """The two records of a domain as its DNS page and its public verification page show them."""
    zone = zone_of(apex)
    return DnsInstructions(zone=zone, delegation=_view(validation.delegation, zone), ownership=_view(validation.ownership, zone))
