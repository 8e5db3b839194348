"""The two DNS records a caller publishes for a domain (and, when configured, the one pointing its
visitors at the TLS terminator), and the statuses a domain moves through.

Every other part (the API shape, verification, the diagnosis, the portal's instructions, the
development DNS simulation) takes the records' names and values from here.
"""

from __future__ import annotations

import attrs

from core.dns.traffic import TrafficTarget
from core.hostnames import zone_of
from store.records import DomainRow

DELEGATION_PREFIX = "_acme-challenge."
OWNERSHIP_PREFIX = "_service-verify."
OWNERSHIP_VALUE_PREFIX = "service-domain-verification="
#: Short TTLs: a record published by mistake is corrected within minutes.
DELEGATION_TTL = 300
OWNERSHIP_TTL = 300
#: The traffic record's too: moving visitors back is as quick.
TRAFFIC_TTL = 300
VALIDATION_STATUSES = ("pending", "verified", "error")
CERT_STATUSES = ("none", "pending", "active", "renewing", "error", "blocked")
OPS_STATUSES = ("active", "action_needed", "blocked", "pending")


def ops_status(validation_status: str, cert_status: str, *, drifted: bool = False, waiting: bool = False) -> str:
    """The one place opsStatus is decided (docs/concepts.md, "opsStatus").

    blocked: the provider blocked the certificate. action_needed: DNS not verified, the
    certificate failed, or a verified domain's delegation or CAA drifted (the next renewal would
    fail). active: a certificate is serving (active or renewing). pending: DNS verified, waiting on
    the certificate; or nothing to do but wait (``waiting``): DNS pending with its records published
    at the zone's own nameservers, or a lookup that only failed; a verified domain's CNAME published
    again that a resolver's cache still hides.

    A certificate still valid for a domain no longer verified (its ownership record holds another
    workspace's token now) is ``action_needed``: it is renewed no more, nor handed to a TLS
    terminator (store/acme.py).
    """
    if cert_status == "blocked":
        return "blocked"
    if drifted:
        return "action_needed"
    if waiting and cert_status != "error":
        return "pending"
    if cert_status in ("active", "renewing") and validation_status == "verified":
        return "active"
    if validation_status != "verified" or cert_status == "error":
        return "action_needed"
    return "pending"


@attrs.frozen
class DnsRecord:
    type: str
    host: str
    value: str
    ttl: int


@attrs.frozen
class DelegationRecord:
    """The CNAME at the top level, the ownership TXT nested (spec)."""

    type: str
    host: str
    value: str
    ttl: int
    ownership: DnsRecord
    traffic_records: list[DnsRecord] | None = None
    "Beyond the spec: where the hostname itself points, while ``[tls_terminator] traffic_*`` is set."


def delegation_record(row: DomainRow) -> DnsRecord:
    return DnsRecord(type="CNAME", host=DELEGATION_PREFIX + row.apex, value=row.delegation_target, ttl=DELEGATION_TTL)


def ownership_record(row: DomainRow) -> DnsRecord:
    value = OWNERSHIP_VALUE_PREFIX + row.ownership_token
    return DnsRecord(type="TXT", host=OWNERSHIP_PREFIX + row.apex, value=value, ttl=OWNERSHIP_TTL)


def traffic_records(apex: str, target: TrafficTarget | None, zone: str) -> list[DnsRecord] | None:
    """Where customers point the hostname itself so that visitors reach the terminator serving its
    certificate: a CNAME to the terminator's name, but A/AAAA records at the top of a zone (``zone``),
    which may hold no CNAME, or with no name configured. A CNAME at a zone's top stays the answer
    when no address is configured: DNS hosts that flatten CNAMEs (or offer ALIAS) take it. None while
    ``[tls_terminator] traffic_cname`` and ``traffic_addresses`` are both empty."""
    if target is None:
        return None
    if target.cname and (apex != zone or not target.addresses):
        return [DnsRecord(type="CNAME", host=apex, value=target.cname, ttl=TRAFFIC_TTL)]
    return [DnsRecord(type="A" if ip.version == 4 else "AAAA", host=apex, value=str(ip), ttl=TRAFFIC_TTL)
            for ip in target.addresses]


def row_traffic_records(row: DomainRow, target: TrafficTarget | None) -> list[DnsRecord] | None:
    """``traffic_records`` for a domain, in the zone its records were found in (else the guess of
    core/domains/instructions.py: the registrable domain)."""
    return traffic_records(row.apex, target, row.dns_host.zone if row.dns_host is not None else zone_of(row.apex))
