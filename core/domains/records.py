"""The two DNS records a caller publishes for a domain, and the statuses a domain moves through.

Every other part (the API shape, verification, the diagnosis, the portal's instructions, the
development DNS simulation) takes the records' names and values from here.
"""

from __future__ import annotations

import attrs

from store.records import DomainRow

DELEGATION_PREFIX = "_acme-challenge."
OWNERSHIP_PREFIX = "_service-verify."
OWNERSHIP_VALUE_PREFIX = "service-domain-verification="
#: Short TTLs: a record published by mistake is corrected within minutes.
DELEGATION_TTL = 300
OWNERSHIP_TTL = 300
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


def delegation_record(row: DomainRow) -> DnsRecord:
    return DnsRecord(type="CNAME", host=DELEGATION_PREFIX + row.apex, value=row.delegation_target, ttl=DELEGATION_TTL)


def ownership_record(row: DomainRow) -> DnsRecord:
    value = OWNERSHIP_VALUE_PREFIX + row.ownership_token
    return DnsRecord(type="TXT", host=OWNERSHIP_PREFIX + row.apex, value=value, ttl=OWNERSHIP_TTL)
