"""A domain's two DNS records (and, when configured, the one for its visitors' traffic) as a person reads them on the portal's DNS page and on the public
verification page: each name in full and as the customer's DNS panel asks for it.

When the zone's DNS host is known (core/verification/dns_host.py), the name and value are in the
form that host's panel wants (core/domains/dns_hosts.py), with its gotchas. Until then the zone is the
registrable domain (a guess: most customers manage that zone) and the name is relative to it.
"""

from __future__ import annotations

import attrs

from core.config import TlsTerminatorConfig
from core.dns.traffic import TrafficTarget
from core.domains import dns_hosts
from core.domains.dns_host_view import DnsHostView, PanelRecord
from core.domains.records import DnsRecord, traffic_records
from core.domains.shape import Domain
from core.hostnames import zone_of


@attrs.frozen
class RecordView:
    """One DNS record, with the name both in full and as the customer's DNS panel asks for it."""

    type: str
    host: str
    panel_name: str
    "The name as typed in the panel (relative to the zone, ``@`` or empty for the zone itself)."
    value: str
    panel_value: str
    "The value as typed in the panel (a trailing dot on a CNAME target where the panel needs it)."
    ttl: int


@attrs.frozen
class DnsInstructions:
    zone: str
    delegation: RecordView
    ownership: RecordView
    host: DnsHostView | None = None
    "Where the zone is hosted, once found."
    host_known: bool = False
    "The zone's nameservers are those of a DNS host in core/domains/dns_hosts.py."
    traffic: list[RecordView] = attrs.Factory(list)
    "Where the hostname itself points, for its visitors (``[tls_terminator] traffic_*``); none when unset."
    traffic_cname_at_apex: bool = False
    "The traffic record is a CNAME at the zone's top, which only a DNS host that flattens CNAMEs takes."


def _view(record: DnsRecord, panel: PanelRecord) -> RecordView:
    return RecordView(type=record.type, host=record.host, panel_name=panel.name, value=record.value,
                      panel_value=panel.value, ttl=record.ttl)


def dns_instructions(domain: Domain, terminator: TlsTerminatorConfig | None = None) -> DnsInstructions:
    """The records of a domain as its DNS page and its public verification page show them; the
    traffic record too when ``terminator`` (``[tls_terminator]``) names where visitors go."""
    target = TrafficTarget.from_config(terminator) if terminator is not None else None
    view, validation = domain.dns_host, domain.validation
    if view is not None:  # the panel's forms, as the API's ``dnsHost`` gives them
        zone, delegation, ownership = view.zone, view.records.delegation, view.records.ownership
    else:
        zone = zone_of(domain.apex)
        delegation, ownership = (PanelRecord(dns_hosts.record_name(None, r.host, zone), r.value)
                                 for r in (validation.delegation, validation.ownership))
    panel = dns_hosts.by_key(view.key) if view is not None and view.key else None
    traffic = [_view(r, PanelRecord(dns_hosts.record_name(panel, r.host, zone),
                                    dns_hosts.cname_target(panel, r.value) if r.type == "CNAME" else r.value))
               for r in traffic_records(domain.apex, target, zone) or []]
    return DnsInstructions(zone=zone, delegation=_view(validation.delegation, delegation),
                           ownership=_view(validation.ownership, ownership), host=view,
                           host_known=view is not None and view.name is not None, traffic=traffic,
                           traffic_cname_at_apex=domain.apex == zone and any(r.type == "CNAME" for r in traffic))
