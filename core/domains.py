"""Domains: the records a caller publishes, the API shape, and create/bulk/patch/delete rules."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from core import hostnames
from core.accounts import valid_email
from core.errors import NotFound, ValidationError
from core.ids import uuid7
from core.wire import format_timestamp
from store.records import DomainRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

DELEGATION_PREFIX = "_acme-challenge."
OWNERSHIP_PREFIX = "_service-verify."
OWNERSHIP_VALUE_PREFIX = "service-domain-verification="
#: Short TTLs: a record published by mistake is corrected within minutes.
DELEGATION_TTL = 300
OWNERSHIP_TTL = 300
NOTES_MAX = 2000
TAG_MAX = 64
TAGS_MAX = 50
BULK_MAX = 500
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

VALIDATION_STATUSES = ("pending", "verified", "error")
CERT_STATUSES = ("none", "pending", "active", "renewing", "error", "blocked")
OPS_STATUSES = ("active", "action_needed", "blocked", "pending")


def ops_status(validation_status: str, cert_status: str) -> str:
    """The one place opsStatus is decided (README, "opsStatus").

    blocked: the provider blocked the certificate. active: a certificate is serving (active or
    renewing). action_needed: DNS not verified, or the certificate failed. pending: DNS verified,
    waiting on the certificate.
    """
    if cert_status == "blocked":
        return "blocked"
    if cert_status in ("active", "renewing"):
        return "active"
    if validation_status != "verified" or cert_status == "error":
        return "action_needed"
    return "pending"


# --- API shapes -------------------------------------------------------------------------------


@attrs.frozen
class DnsRecord:
    type: str
    host: str
    value: str
    ttl: int


@attrs.frozen
class Validation:
    status: str
    delegation: DnsRecord
    ownership: DnsRecord
    last_checked_at: dt.datetime | None = None
    last_error: str | None = None


@attrs.frozen
class CertSummary:
    status: str
    issuer: str | None = None
    not_after: dt.datetime | None = None
    next_renewal_at: dt.datetime | None = None
    last_issued_at: dt.datetime | None = None
    last_error: str | None = None
    trace_id: uuid.UUID | None = None


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
        ),
        cert=CertSummary(
            status=row.cert_status,
            issuer=row.cert_issuer,
            not_after=row.cert_not_after,
            next_renewal_at=row.cert_next_renewal_at,
            last_issued_at=row.cert_last_issued_at,
            last_error=row.cert_error,
            trace_id=row.cert_trace_id,
        ),
        ops_status=row.ops_status,
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
        "id": str(row.id), "apex": row.apex, "orgId": str(row.workspace_id), "tags": row.tags,
        "createdAt": format_timestamp(row.created_at), "updatedAt": format_timestamp(row.updated_at),
        "validation": validation, "cert": cert, "opsStatus": row.ops_status,
    }
    if row.client_id is not None:
        domain["clientId"] = str(row.client_id)
    if row.contact_email is not None:
        domain["contactEmail"] = row.contact_email
    if row.notes is not None:
        domain["notes"] = row.notes
    return domain


_RENDERED: OrderedDict[uuid.UUID, tuple[DomainRow, bytes]] = OrderedDict()
_RENDERED_MAX = 10_000


def render(row: DomainRow) -> bytes:
    """The Domain's JSON, reused while the store hands out the very same row object.

    Rows are immutable and the store hands out a new object after every change, so an identity
    check is an exact freshness test; GET-polling clients then cost no re-serialisation.
    """
    hit = _RENDERED.get(row.id)
    if hit is not None and hit[0] is row:
        return hit[1]
    body = orjson.dumps(wire(row))
    _RENDERED[row.id] = (row, body)
    if len(_RENDERED) > _RENDERED_MAX:
        _RENDERED.popitem(last=False)
    return body


# --- requests -----------------------------------------------------------------------------------


@attrs.frozen
class CreateDomain:
    apex: str
    contact_email: str | None = None
    client_id: uuid.UUID | None = None
    tags: list[str] | None = None
    notes: str | None = None


@attrs.frozen
class BulkCreate:
    apex_list: list[str]
    client_id: uuid.UUID | None = None
    tags: list[str] | None = None


@attrs.frozen
class PatchDomain:
    tags: list[str] | None = None
    notes: str | None = None


@attrs.frozen
class Rejected:
    apex: str
    reason: str


@attrs.frozen
class BulkResult:
    created: list[Domain]
    rejected: list[Rejected]


def clean_tags(tags: list[str] | None, errors: dict[str, list[str]]) -> list[str] | None:
    """Trimmed, de-duplicated tags; problems go to ``errors['tags']``."""
    if tags is None:
        return None
    cleaned: list[str] = []
    for tag in tags:
        tag = tag.strip()
        if not tag or len(tag) > TAG_MAX or _CONTROL.search(tag):
            errors.setdefault("tags", []).append(f"Each tag must be 1 to {TAG_MAX} printable characters")
            return None
        if tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > TAGS_MAX:
        errors.setdefault("tags", []).append(f"At most {TAGS_MAX} tags")
    return cleaned


def _clean_notes(notes: str | None, errors: dict[str, list[str]]) -> str | None:
    if notes is not None and len(notes) > NOTES_MAX:
        errors.setdefault("notes", []).append(f"Must be at most {NOTES_MAX} characters (got {len(notes)})")
    return notes


def _clean_email(email: str | None, errors: dict[str, list[str]]) -> str | None:
    if email is None:
        return None
    email = email.strip()
    if not valid_email(email):
        errors.setdefault("contactEmail", []).append("Must be an e-mail address")
    return email


def _check_client(services: Services, workspace: Workspace, client_id: uuid.UUID | None) -> bool:
    return client_id is None or services.store.clients.get(workspace.id, client_id) is not None


def _new_row(services: Services, workspace: Workspace, apex: str, target: str, **fields: object) -> DomainRow:
    now = services.clock.now()
    return DomainRow(
        id=uuid7(),  # time-ordered: appended to the id index, not scattered through it
        workspace_id=workspace.id,
        apex=apex,
        created_at=now,
        updated_at=now,
        delegation_target=target,
        validation_status="pending",
        cert_status="none",
        ops_status=ops_status("pending", "none"),
        ownership_token=workspace.ownership_token,
        **fields,  # type: ignore[arg-type]
    )


# --- operations ---------------------------------------------------------------------------------


@attrs.frozen
class NewDomain:
    """A create request that passed every rule, with the provider's delegation target."""

    apex: str
    target: str
    tags: list[str] | None
    notes: str | None
    contact_email: str | None
    client_id: uuid.UUID | None


async def prepare_create(
    services: Services, *, workspace: Workspace | None, request: CreateDomain, apex_field: str = "apex"
) -> NewDomain:
    """Check a create request and ask the provider for the target; nothing is written yet."""
    errors: dict[str, list[str]] = {}
    try:
        apex = hostnames.normalise(request.apex)
    except hostnames.HostnameError as exc:
        errors[apex_field] = [str(exc)]
    tags = clean_tags(request.tags, errors)
    notes = _clean_notes(request.notes, errors)
    email = _clean_email(request.contact_email, errors)
    if errors:
        raise ValidationError(field_errors=errors)
    if request.client_id is not None and (workspace is None or not _check_client(services, workspace, request.client_id)):
        raise NotFound("Client not found.")
    target = await services.provider.delegation_target(apex)  # network: before any transaction
    return NewDomain(apex=apex, target=target, tags=tags, notes=notes, contact_email=email, client_id=request.client_id)


def save_create(services: Services, *, workspace: Workspace, new: NewDomain) -> DomainRow:
    """Store a prepared create: a new row, or the known hostname's row with supplied fields."""
    store = services.store
    with store.transaction():
        existing = store.domains.by_apex(workspace.id, [new.apex]).get(new.apex)
        if existing is None:
            row = _new_row(
                services, workspace, new.apex, new.target,
                client_id=new.client_id, contact_email=new.contact_email, notes=new.notes or None, tags=new.tags or [],
            )
            store.domains.insert(row)
        else:
            # Re-submitting keeps the record and its ownership token (spec rule 2).
            row = attrs.evolve(
                existing,
                contact_email=new.contact_email if new.contact_email is not None else existing.contact_email,
                notes=(new.notes or None) if new.notes is not None else existing.notes,
                delegation_target=new.target,
                updated_at=services.clock.now(),
            )
            store.domains.update(row)
    return row


async def create(services: Services, *, workspace: Workspace, request: CreateDomain) -> Domain:
    """A new domain, or the existing one for a known hostname with the supplied fields updated."""
    new = await prepare_create(services, workspace=workspace, request=request)
    return present(save_create(services, workspace=workspace, new=new))


async def bulk_create(services: Services, *, workspace: Workspace, request: BulkCreate) -> BulkResult:
    """Create many; each hostname succeeds or is rejected on its own (spec rule 3)."""
    errors: dict[str, list[str]] = {}
    if not 1 <= len(request.apex_list) <= BULK_MAX:
        errors["apexList"] = [f"Must hold 1 to {BULK_MAX} hostnames (got {len(request.apex_list)})"]
    tags = clean_tags(request.tags, errors)
    if errors:
        raise ValidationError(field_errors=errors)
    if not _check_client(services, workspace, request.client_id):
        return BulkResult(created=[], rejected=[Rejected(apex=a, reason="Client not found.") for a in request.apex_list])
    rejected: list[Rejected] = []
    wanted: dict[str, str] = {}  # canonical hostname -> as submitted
    for raw in request.apex_list:
        try:
            apex = hostnames.normalise(raw)
        except hostnames.HostnameError as exc:
            rejected.append(Rejected(apex=raw, reason=str(exc)))
            continue
        if apex in wanted:
            rejected.append(Rejected(apex=raw, reason=f"Duplicate of '{wanted[apex]}' earlier in apexList."))
            continue
        wanted[apex] = raw
    targets = {apex: await services.provider.delegation_target(apex) for apex in wanted}
    created: list[DomainRow] = []
    new: list[DomainRow] = []
    store = services.store
    with store.transaction():
        existing = store.domains.by_apex(workspace.id, list(wanted))
        for apex in wanted:
            if apex in existing:
                row = attrs.evolve(existing[apex], delegation_target=targets[apex], updated_at=services.clock.now())
                store.domains.update(row)
            else:
                row = _new_row(services, workspace, apex, targets[apex], client_id=request.client_id, tags=tags or [])
                new.append(row)
            created.append(row)
        store.domains.insert_many(new)
    return BulkResult(created=[present(r) for r in created], rejected=rejected)


def load(services: Services, workspace: Workspace, domain_id: uuid.UUID) -> DomainRow:
    """A domain of this workspace; another workspace's domain does not exist here."""
    row = services.store.domains.get(workspace.id, domain_id)
    if row is None:
        raise NotFound("Domain not found.")
    return row


def patch(services: Services, *, workspace: Workspace, domain_id: uuid.UUID, request: PatchDomain) -> Domain:
    """Change tags and/or notes; an empty list or string clears them (spec rule 6)."""
    errors: dict[str, list[str]] = {}
    tags = clean_tags(request.tags, errors)
    notes = _clean_notes(request.notes, errors)
    if errors:
        raise ValidationError(field_errors=errors)
    with services.store.transaction():
        row = load(services, workspace, domain_id)
        if tags is None and notes is None:
            return present(row)
        row = attrs.evolve(
            row,
            tags=tags if tags is not None else row.tags,
            notes=(notes or None) if notes is not None else row.notes,
            updated_at=services.clock.now(),
        )
        services.store.domains.update(row, tags_changed=tags is not None)
    return present(row)


def delete(services: Services, *, workspace: Workspace, domain_id: uuid.UUID) -> None:
    """Remove the service's record only: no provider call, no DNS change (spec)."""
    with services.store.transaction():
        if not services.store.domains.delete(workspace.id, domain_id):
            raise NotFound("Domain not found.")


def delegation(services: Services, *, workspace: Workspace, domain_id: uuid.UUID) -> DelegationRecord:
    row = load(services, workspace, domain_id)
    cname = delegation_record(row)
    return DelegationRecord(type=cname.type, host=cname.host, value=cname.value, ttl=cname.ttl, ownership=ownership_record(row))
