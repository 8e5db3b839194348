"""A domain as the API shows it: the ``Domain`` record and its JSON, built fast for pages of many."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import OrderedDict
from typing import Any

import attrs
import orjson

from core.domains.dns_host_view import DnsHostView, dns_host_view
from core.domains.records import (
    DELEGATION_PREFIX,
    DELEGATION_TTL,
    OWNERSHIP_PREFIX,
    OWNERSHIP_TTL,
    OWNERSHIP_VALUE_PREFIX,
    DnsRecord,
    delegation_record,
    ownership_record,
)
from core.wire import INTERNAL, dump, format_timestamp
from store.domain_rows import StoredDomain, from_columns, workspace_text
from store.records import DomainRow, DriftProblem


@attrs.frozen
class Drift:
    """Problems a check found with a verified domain's DNS (core/domains/drift.py)."""

    since: dt.datetime
    problems: list[DriftProblem]


@attrs.frozen
class Validation:
    status: str
    delegation: DnsRecord
    ownership: DnsRecord
    last_checked_at: dt.datetime | None = None
    last_error: str | None = None
    drift: Drift | None = None


@attrs.frozen
class CertSummary:
    status: str
    issuer: str | None = None
    not_after: dt.datetime | None = None
    next_renewal_at: dt.datetime | None = None
    last_issued_at: dt.datetime | None = None
    last_error: str | None = None
    trace_id: uuid.UUID | None = None
    previous_issuer: str | None = attrs.field(default=None, metadata={INTERNAL: True})
    "The intermediate before the latest renewal, when it changed (the portal says so; the API does not)."


@attrs.frozen
class Domain:
    id: uuid.UUID
    apex: str
    org_id: uuid.UUID
    tags: list[str]
    created_at: dt.datetime
    updated_at: dt.datetime
    validation: Validation
    cert: CertSummary
    ops_status: str
    client_id: uuid.UUID | None = None
    contact_email: str | None = None
    notes: str | None = None
    next_check_at: dt.datetime | None = None
    "When the background checks look at it next (core/domains/schedule.py); absent when not scheduled."
    dns_host: DnsHostView | None = None
    "Where its records are published, once found (core/verification/dns_host.py)."


def present(row: DomainRow) -> Domain:
    return Domain(
        id=row.id,
        apex=row.apex,
        org_id=row.workspace_id,
        client_id=row.client_id,
        contact_email=row.contact_email,
        notes=row.notes,
        tags=row.tags,
        created_at=row.created_at,
        updated_at=row.updated_at,
        validation=Validation(
            status=row.validation_status,
            delegation=delegation_record(row),
            ownership=ownership_record(row),
            last_checked_at=row.validation_checked_at,
            last_error=row.validation_error,
            drift=Drift(since=row.drift_since, problems=list(row.drift)) if row.drift and row.drift_since else None,
        ),
        cert=CertSummary(
            status=row.cert_status,
            issuer=row.cert_issuer,
            not_after=row.cert_not_after,
            next_renewal_at=row.cert_next_renewal_at,
            last_issued_at=row.cert_last_issued_at,
            last_error=row.cert_error,
            trace_id=row.cert_trace_id,
            previous_issuer=row.cert_previous_issuer,
        ),
        ops_status=row.ops_status,
        next_check_at=row.next_check_at,
        dns_host=dns_host_view(row),
    )


def wire(row: DomainRow) -> dict[str, Any]:
    """``dump(present(row))``, built directly: making and unstructuring ``Domain`` records was most
    of what a page of 100 domains not read before cost (a domain with every date set: 20 -> 12 us
    as JSON). A test holds the two to the same bytes for every combination of optional fields."""
    validation: dict[str, Any] = {
        "status": row.validation_status,
        "delegation": {"type": "CNAME", "host": DELEGATION_PREFIX + row.apex, "value": row.delegation_target,
                       "ttl": DELEGATION_TTL},
        "ownership": {"type": "TXT", "host": OWNERSHIP_PREFIX + row.apex,
                      "value": OWNERSHIP_VALUE_PREFIX + row.ownership_token, "ttl": OWNERSHIP_TTL},
    }
    if row.validation_checked_at is not None:
        validation["lastCheckedAt"] = format_timestamp(row.validation_checked_at)
    if row.validation_error is not None:
        validation["lastError"] = row.validation_error
    if row.drift and row.drift_since is not None:
        validation["drift"] = {"since": format_timestamp(row.drift_since),
                               "problems": [{"code": p.code, "message": p.message, "fix": p.fix} for p in row.drift]}
    cert: dict[str, Any] = {"status": row.cert_status}
    if row.cert_issuer is not None:
        cert["issuer"] = row.cert_issuer
    for key, stamp in (("notAfter", row.cert_not_after), ("nextRenewalAt", row.cert_next_renewal_at),
                       ("lastIssuedAt", row.cert_last_issued_at)):
        if stamp is not None:
            cert[key] = format_timestamp(stamp)
    if row.cert_error is not None:
        cert["lastError"] = row.cert_error
    if row.cert_trace_id is not None:
        cert["traceId"] = str(row.cert_trace_id)
    domain: dict[str, Any] = {
        "id": str(row.id), "apex": row.apex, "orgId": workspace_text(row.workspace_id), "tags": row.tags,
        "createdAt": format_timestamp(row.created_at), "updatedAt": format_timestamp(row.updated_at),
        "validation": validation, "cert": cert, "opsStatus": row.ops_status,
    }
    if row.client_id is not None:
        domain["clientId"] = str(row.client_id)
    if row.contact_email is not None:
        domain["contactEmail"] = row.contact_email
    if row.notes is not None:
        domain["notes"] = row.notes
    if row.next_check_at is not None:
        domain["nextCheckAt"] = format_timestamp(row.next_check_at)
    if row.dns_host is not None:
        domain["dnsHost"] = dump(dns_host_view(row))
    return domain


_RENDERED: OrderedDict[int, tuple[DomainRow, bytes]] = OrderedDict()
_RENDERED_MAX = 10_000


def render(row: DomainRow) -> bytes:
    """The Domain's JSON, reused while the store hands out the very same row object.

    Rows are immutable and the store hands out a new object after every change, so an identity
    check is an exact freshness test; GET-polling clients then cost no re-serialisation.
    """
    key = row.id.int  # an int hashes in C; a UUID's __hash__ is Python code
    hit = _RENDERED.get(key)
    if hit is not None and hit[0] is row:
        return hit[1]
    body = orjson.dumps(wire(row))
    _RENDERED[key] = (row, body)
    if len(_RENDERED) > _RENDERED_MAX:
        _RENDERED.popitem(last=False)
    return body


def wire_stored(r: StoredDomain) -> dict[str, Any]:
    """``wire(from_columns(r))``, from the stored text: a page of domains read for the first time
    cost more in building records and formatting their dates again than in reading them (a test
    holds the two to the same bytes). Only a DNS host seen goes through the record."""
    validation: dict[str, Any] = {
        "status": r["validation_status"],
        "delegation": {"type": "CNAME", "host": DELEGATION_PREFIX + r["apex"], "value": r["delegation_target"],
                       "ttl": DELEGATION_TTL},
        "ownership": {"type": "TXT", "host": OWNERSHIP_PREFIX + r["apex"],
                      "value": OWNERSHIP_VALUE_PREFIX + r["ownership_token"], "ttl": OWNERSHIP_TTL},
    }
    for key, column in (("lastCheckedAt", "validation_checked_at"), ("lastError", "validation_error")):
        if r[column] is not None:
            validation[key] = r[column]
    if r["drift"] and r["drift_since"] is not None:
        problems = orjson.loads(r["drift"])
        if problems:
            validation["drift"] = {"since": r["drift_since"],
                                   "problems": [{"code": p["code"], "message": p["message"], "fix": p["fix"]} for p in problems]}
    cert: dict[str, Any] = {"status": r["cert_status"]}
    for key, column in _CERT_COLUMNS:
        if r[column] is not None:
            cert[key] = r[column]
    domain: dict[str, Any] = {
        "id": r["id"], "apex": r["apex"], "orgId": r["workspace_id"], "tags": orjson.loads(r["tags"]),
        "createdAt": r["created_at"], "updatedAt": r["updated_at"],
        "validation": validation, "cert": cert, "opsStatus": r["ops_status"],
    }
    for key, column in _DOMAIN_COLUMNS:
        if r[column] is not None:
            domain[key] = r[column]
    if r["dns_host"]:
        domain["dnsHost"] = dump(dns_host_view(from_columns(r)))
    return domain


_CERT_COLUMNS = (("issuer", "cert_issuer"), ("notAfter", "cert_not_after"), ("nextRenewalAt", "cert_next_renewal_at"),
                 ("lastIssuedAt", "cert_last_issued_at"), ("lastError", "cert_error"), ("traceId", "cert_trace_id"))
_DOMAIN_COLUMNS = (("clientId", "client_id"), ("contactEmail", "contact_email"), ("notes", "notes"),
                   ("nextCheckAt", "next_check_at"))
_RENDERED_STORED: OrderedDict[str, tuple[StoredDomain, bytes]] = OrderedDict()


def render_stored(r: StoredDomain) -> bytes:
    """The Domain's JSON from its stored row, reused while the row reads the same: its JSON depends
    on nothing else, so a polled page costs no re-serialisation."""
    hit = _RENDERED_STORED.get(r["id"])
    if hit is not None and hit[0] == r:
        return hit[1]
    body = orjson.dumps(wire_stored(r))
    _RENDERED_STORED[r["id"]] = (r, body)
    if len(_RENDERED_STORED) > _RENDERED_MAX:
        _RENDERED_STORED.popitem(last=False)
    return body
