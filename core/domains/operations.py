"""Creating, changing and deleting domains: the rules every entry point (API, bulk, sign-up) shares.

The plain functions here are units of work (``await store.run(load, ...)``); the async ones ask
the provider first and then store in one unit, never holding one across the network.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import attrs
import orjson

from core import hostnames
from core.dns.traffic import TrafficTarget
from core.domains import schedule
from core.domains.ids import uuid7
from core.domains.records import (
    DelegationRecord,
    delegation_record,
    ops_status,
    ownership_record,
    row_traffic_records,
)
from core.domains.shape import Domain, present, render
from core.errors import NotFound, ValidationError
from core.text import EMAIL_MESSAGE, email_address, printable, shown
from core.wire import dump, parse_uuid
from store.records import DomainRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

NOTES_MAX = 2000
TAG_MAX = 64
TAGS_MAX = 50
BULK_MAX = 500


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
    client_id: str | None = None
    "Beyond the spec: a client's id files the domain under that client; an empty string, under none."


@attrs.frozen
class Rejected:
    apex: str
    reason: str


@attrs.frozen
class BulkResult:
    """Rows, not ``Domain`` records: the answer is written with each row's rendered JSON
    (``bulk_json``), as pages are; unstructuring 500 records was a seventh of a bulk create."""

    created: list[DomainRow]
    rejected: list[Rejected]
    known: frozenset[uuid.UUID] = frozenset()
    "Of ``created``, the hostnames the workspace had already (re-submitting keeps the record, spec rule 2)."


def bulk_json(result: BulkResult) -> bytes:
    """The BulkResult schema's JSON: ``{"created": [Domain...], "rejected": [...]}``."""
    return (b'{"created":[' + b",".join(render(row) for row in result.created) + b'],"rejected":'
            + orjson.dumps(dump(result.rejected)) + b"}")


def clean_tags(tags: list[str] | None, errors: dict[str, list[str]]) -> list[str] | None:
    """Trimmed, de-duplicated tags, each printable (core/text.py); problems go to ``errors['tags']``."""
    if tags is None:
        return None
    cleaned: list[str] = []
    for raw in tags:
        tag = printable(raw)
        if not tag or len(tag) > TAG_MAX:
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
    address = email_address(email)
    if address is None:
        errors.setdefault("contactEmail", []).append(EMAIL_MESSAGE)
    return address


def _clean_client_id(raw: str | None, errors: dict[str, list[str]]) -> uuid.UUID | None:
    """A PATCH's ``clientId``: its uuid, or None for an empty string (and when it is absent)."""
    if not raw:
        return None
    try:
        return parse_uuid(raw)
    except ValueError:
        errors.setdefault("clientId", []).append("Must be a client's id (a uuid), or an empty string for none")
        return None


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
        next_check_at=schedule.first(services.config.lifecycle, now),
        checks_since=now,
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
    if request.client_id is not None and (
        workspace is None or not await services.store.run(_check_client, services, workspace, request.client_id)
    ):
        raise NotFound("Client not found.")
    target = await services.provider.delegation_target(apex)  # network: before any transaction
    return NewDomain(apex=apex, target=target, tags=tags, notes=notes, contact_email=email, client_id=request.client_id)


def save_create(services: Services, *, workspace: Workspace, new: NewDomain) -> DomainRow:
    """Store a prepared create: a new row, or the known hostname's row with supplied fields."""
    store = services.store
    with store.transaction():
        row = _new_row(
            services, workspace, new.apex, new.target,
            client_id=new.client_id, contact_email=new.contact_email, notes=new.notes or None, tags=new.tags or [],
        )
        if not store.domains.insert_new([row]):
            existing = store.domains.by_apex(workspace.id, [new.apex])[new.apex]
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
    return present(await services.store.run(save_create, services, workspace=workspace, new=new))


async def bulk_create(services: Services, *, workspace: Workspace, request: BulkCreate) -> BulkResult:
    """Create many; each hostname succeeds or is rejected on its own (spec rule 3)."""
    errors: dict[str, list[str]] = {}
    if not 1 <= len(request.apex_list) <= BULK_MAX:
        errors["apexList"] = [f"Must hold 1 to {BULK_MAX} hostnames (got {len(request.apex_list)})"]
    tags = clean_tags(request.tags, errors)
    if errors:
        raise ValidationError(field_errors=errors)
    # Without a client (the usual bulk request) the one unit of work is the write below.
    if request.client_id is not None and not await services.store.run(_check_client, services, workspace, request.client_id):
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
            rejected.append(Rejected(apex=raw, reason=f"Duplicate of '{shown(wanted[apex])}' earlier in apexList."))
            continue
        wanted[apex] = raw
    targets = await services.provider.delegation_targets(list(wanted))
    created, known = await services.store.run(_save_bulk, services, workspace, targets, client_id=request.client_id,
                                              tags=tags)
    return BulkResult(created=created, rejected=rejected, known=known)


@attrs.frozen
class BulkLine:
    """One submitted hostname and what became of it: its domain, or why it was refused."""

    given: str
    row: DomainRow | None
    reason: str | None
    known: bool = False
    "The workspace had this hostname already."


def bulk_lines(request: BulkCreate, result: BulkResult) -> list[BulkLine]:
    """``result`` in the order of ``request.apex_list``, one line per submitted hostname (the portal
    answers line by line), matched as ``bulk_create`` decided: the first of equal hostnames is the
    one created, the others are refused as duplicates."""
    rows = {row.apex: row for row in result.created}
    reasons: dict[str, list[str]] = {}
    for rejected in result.rejected:
        reasons.setdefault(rejected.apex, []).append(rejected.reason)
    seen: set[str] = set()
    lines: list[BulkLine] = []
    for raw in request.apex_list:
        try:
            apex: str | None = hostnames.normalise(raw)
        except hostnames.HostnameError:
            apex = None
        if apex is not None and apex not in seen and apex in rows:
            lines.append(BulkLine(given=raw, row=rows[apex], reason=None, known=rows[apex].id in result.known))
        else:
            lines.append(BulkLine(given=raw, row=None, reason=(reasons.get(raw) or ["Not added."]).pop(0)))
        if apex is not None:
            seen.add(apex)
    return lines


def _save_bulk(services: Services, workspace: Workspace, targets: dict[str, str], *,
               client_id: uuid.UUID | None, tags: list[str] | None) -> tuple[list[DomainRow], frozenset[uuid.UUID]]:
    """One transaction: the new hostnames are inserted, the known ones' rows take the new target
    (store.domains.insert_new: no read before the write). Also returns the ids of the known ones."""
    store = services.store
    with store.transaction():
        rows = [_new_row(services, workspace, apex, target, client_id=client_id, tags=tags or [])
                for apex, target in targets.items()]
        inserted = store.domains.insert_new(rows)
        known = [row.apex for row in rows if row.id not in inserted]
        existing = store.domains.by_apex(workspace.id, known) if known else {}
        created = []
        for row in rows:
            if row.apex in existing:
                row = attrs.evolve(existing[row.apex], delegation_target=targets[row.apex], updated_at=services.clock.now())
                store.domains.update(row)
            created.append(row)
    store.optimize_if_grown()
    return created, frozenset(row.id for row in existing.values())


def load(services: Services, workspace: Workspace, domain_id: uuid.UUID) -> DomainRow:
    """A domain of this workspace; another workspace's domain does not exist here."""
    row = services.store.domains.get(workspace.id, domain_id)
    if row is None:
        raise NotFound("Domain not found.")
    return row


async def fetch(services: Services, workspace: Workspace, domain_id: uuid.UUID) -> DomainRow:
    """``load``, from the cache on the event loop when the domain is kept there: a client
    polling a domain costs no unit of work (on PostgreSQL, a thread hop and a round trip)."""
    row = services.store.domains.cached(workspace.id, domain_id)
    return row if row is not None else await services.store.run(load, services, workspace, domain_id)


def patch(services: Services, *, workspace: Workspace, domain_id: uuid.UUID, request: PatchDomain) -> Domain:
    """Change tags, notes and/or the client; an empty list or string clears them (spec rule 6)."""
    errors: dict[str, list[str]] = {}
    tags = clean_tags(request.tags, errors)
    notes = _clean_notes(request.notes, errors)
    client_id = _clean_client_id(request.client_id, errors)
    if errors:
        raise ValidationError(field_errors=errors)
    with services.store.transaction():
        row = load(services, workspace, domain_id)
        if tags is None and notes is None and request.client_id is None:
            return present(row)
        if not _check_client(services, workspace, client_id):
            raise NotFound("Client not found.")
        row = attrs.evolve(
            row,
            tags=tags if tags is not None else row.tags,
            notes=(notes or None) if notes is not None else row.notes,
            client_id=client_id if request.client_id is not None else row.client_id,
            updated_at=services.clock.now(),
        )
        services.store.domains.update(row, tags_changed=tags is not None)
    return present(row)


def delete(services: Services, *, workspace: Workspace, domain_id: uuid.UUID) -> None:
    """Remove the service's record only: no provider call, no DNS change (spec). Certificates the
    service issued itself (ACME) are marked in the same transaction, before their records go with
    the domain: served no more at once, and revoked within a minute (core/acme/upkeep.py)."""
    with services.store.transaction():
        services.store.acme.mark_deleted(workspace.id, domain_id, services.clock.now())
        if not services.store.domains.delete(workspace.id, domain_id):
            raise NotFound("Domain not found.")


def delegation(services: Services, *, workspace: Workspace, domain_id: uuid.UUID) -> DelegationRecord:
    row = load(services, workspace, domain_id)
    cname = delegation_record(row)
    traffic = row_traffic_records(row, TrafficTarget.from_config(services.config.tls_terminator))
    return DelegationRecord(type=cname.type, host=cname.host, value=cname.value, ttl=cname.ttl, ownership=ownership_record(row),
                            traffic_records=traffic)
