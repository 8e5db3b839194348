"""A domain's DNS host as the API and the pages show it: where to type our two records, in the
form that host's panel wants them (core/domains/dns_hosts.py), and whether one-click set-up is offered."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlsplit

import attrs

from core.domains import dns_hosts
from core.domains.records import DELEGATION_PREFIX, OWNERSHIP_PREFIX, OWNERSHIP_VALUE_PREFIX
from store.records import DomainRow


@attrs.frozen
class PanelRecord:
    name: str
    "The record's name as typed in this DNS host's panel."
    value: str
    "The value as typed there (a CNAME target ends in a dot where the panel needs one)."


@attrs.frozen
class PanelRecords:
    delegation: PanelRecord
    ownership: PanelRecord


@attrs.frozen
class OneClick:
    provider_name: str
    "The DNS host's name as it gives it; the button reads \"Set up automatically at <providerName>\"."
    url: str
    "POST here (with a verify scope) for a fresh apply URL to send the customer's browser to."
    opens: str
    "The host of the DNS host's consent page, to show beside the button."


@attrs.frozen
class DnsHostView:
    zone: str
    "The zone holding the domain's records (found from DNS, not guessed from the name)."
    panel_name_form: str
    "``relative`` (to the zone, ``@`` for the zone itself), or ``relative_blank_apex`` (empty for the zone itself)."
    records: PanelRecords
    gotchas: list[str]
    checked_at: dt.datetime
    key: str | None = None
    "The DNS host's id (core/domains/dns_hosts.py); absent when its nameservers match no host the service knows."
    name: str | None = None
    help_url: str | None = None
    one_click: OneClick | None = None
    "Present while one-click set-up is offered for this domain."
    one_click_unknown: bool | None = None
    "True when whether it is offered is not known (not asked yet, or not answered); absent otherwise."


def needs_records(row: DomainRow) -> bool:
    """The domain waits for its records, or its delegation CNAME drifted: publishing them helps
    (CAA drift is not fixed by publishing our records)."""
    return row.validation_status != "verified" or any(p.code.startswith("delegation") for p in row.drift)


def dns_host_view(row: DomainRow) -> DnsHostView | None:
    seen = row.dns_host
    if seen is None:
        return None
    host = dns_hosts.by_key(seen.host)
    delegation_name, ownership_name = DELEGATION_PREFIX + row.apex, OWNERSHIP_PREFIX + row.apex
    records = PanelRecords(
        delegation=PanelRecord(dns_hosts.record_name(host, delegation_name, seen.zone),
                               dns_hosts.cname_target(host, row.delegation_target)),
        ownership=PanelRecord(dns_hosts.record_name(host, ownership_name, seen.zone),
                              OWNERSHIP_VALUE_PREFIX + row.ownership_token),
    )
    one_click = None
    if seen.offer is not None and needs_records(row):
        one_click = OneClick(provider_name=seen.offer.provider_name, url=f"/v1/domains/{row.id}/one-click",
                             opens=urlsplit(seen.offer.url_sync_ux).hostname or "")
    return DnsHostView(
        zone=seen.zone, panel_name_form=host.panel_name_form if host else "relative", records=records,
        gotchas=list(host.gotchas) if host else [], checked_at=seen.checked_at,
        key=host.key if host else None, name=host.name if host else None, help_url=host.help_url if host else None,
        one_click=one_click, one_click_unknown=True if seen.offer_unknown and needs_records(row) else None,
    )
