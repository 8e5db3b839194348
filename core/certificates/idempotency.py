"""Idempotency-Key: a retried request gets the stored result instead of a second provider call.

A record is keyed by (workspace, method, requested path, key), so the issue alias path has its
own records; the path is taken with its id as parsed (``canonical_path``), and the body without
its ``null`` members, so a retry that escapes or spells either differently is still the same request. The
claim is one ``INSERT ... ON CONFLICT DO NOTHING``: of two concurrent requests, exactly one wins
and the other gets 409 ``idempotency_in_progress``. The winner holds a lease; a claim left behind
by a crash can be taken over once the lease has run out.

What is stored: the response of every request that reached the provider and stored its result
(a 200 issuance summary, a failed one included). Nothing is stored for a request refused before
that (404, 409 ``delegation_not_verified``, 400) or for one the provider could not answer (502,
503): the claim is released and a retry runs again. Records are purged after ``RETENTION``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import TYPE_CHECKING, Any

import attrs

from core.errors import Conflict, ValidationError
from core.wire import parse_uuid
from store.records import IdempotencyRecord

if TYPE_CHECKING:
    from core.services import Services

HEADER = "Idempotency-Key"
KEY_MAX = 200
LEASE = dt.timedelta(minutes=2)
"Longer than the provider call can take with its bounded retries."
RETENTION = dt.timedelta(hours=24)
FORM_SECRET_RETENTION = dt.timedelta(minutes=10)
"How long a portal form's record keeps the secret its action made, for a duplicate submission."


@attrs.frozen
class IdempotencyKey:
    """What identifies one logical request."""

    method: str
    path: str
    key: str
    fingerprint: str


@attrs.frozen
class Claim:
    record: IdempotencyRecord


@attrs.frozen
class Replay:
    status_code: int
    body: str


def fingerprint(body: Any) -> str:
    """SHA-256 of the parsed body in canonical JSON: key order, white space and members that are
    ``null`` (the same as omitted, as the API document says) do not matter."""
    canonical = json.dumps(_without_nulls(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {name: _without_nulls(member) for name, member in value.items() if member is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def canonical_path(path: str, *, id_segment: int, raw_id: str) -> str:
    """``path`` with the id at ``id_segment`` as parsed, so one id percent-escaped differently
    (``%61`` for ``a``) is one request; an id that does not parse (a 404) stays."""
    try:
        parsed = parse_uuid(raw_id)
    except ValueError:
        return path
    segments = path.split("/")
    segments[id_segment] = str(parsed)
    return "/".join(segments)


def key_from_header(value: str | None, *, method: str, path: str, body: Any) -> IdempotencyKey | None:
    """The request's key, or ``None`` without the header; a malformed key is a 400."""
    if value is None:
        return None
    if not value or len(value) > KEY_MAX or not value.isprintable() or not value.isascii():
        raise ValidationError.field(HEADER, f"Must be 1 to {KEY_MAX} printable ASCII characters")
    return IdempotencyKey(method=method, path=path, key=value, fingerprint=fingerprint(body))


def begin(services: Services, *, workspace_id: Any, key: IdempotencyKey) -> Claim | Replay:
    """Claim the key, or say why not: replay a completed result, or 409."""
    now = services.clock.now()
    record = IdempotencyRecord(
        workspace_id=workspace_id, method=key.method, path=key.path, key=key.key, fingerprint=key.fingerprint,
        state="in_progress", created_at=now, locked_until=now + LEASE,
    )
    repo = services.store.idempotency
    with services.store.transaction():
        if repo.claim(record):
            return Claim(record)
        existing = repo.get(workspace_id, key.method, key.path, key.key)
        assert existing is not None  # the claim lost to it, inside this same transaction
        # A different body is a client bug whatever the state, so it is named first.
        if existing.fingerprint != key.fingerprint:
            raise Conflict(
                "idempotency_key_reused",
                "This Idempotency-Key was used with a different request body; use a new key for a new request.",
            )
        if existing.state == "completed":
            return Replay(status_code=existing.status_code or 200, body=existing.response or "")
        lease_over = existing.locked_until is not None and existing.locked_until <= now
        if lease_over and repo.reclaim(existing, now=now, locked_until=now + LEASE):
            return Claim(attrs.evolve(existing, locked_until=now + LEASE))
        raise Conflict(
            "idempotency_in_progress",
            "A request with this Idempotency-Key is still being processed; retry in a few seconds.",
        )


def complete(services: Services, claim: Claim, *, status_code: int, body: str) -> None:
    """Store the response; call inside the transaction that stores the result it describes."""
    services.store.idempotency.complete(claim.record, status_code=status_code, response=body)


def release(services: Services, claim: Claim) -> None:
    """Give the key back (the request stored nothing), so that a retry runs again."""
    with services.store.transaction():
        services.store.idempotency.release(claim.record)


def keep(services: Services, *, workspace_id: Any, key: IdempotencyKey, body: str) -> None:
    """A unit of work: a result kept under a new key, for a page to show with ``kept`` (the portal's
    answer to a bulk add, line by line: too long for a cookie). Purged with the others."""
    now = services.clock.now()
    record = IdempotencyRecord(
        workspace_id=workspace_id, method=key.method, path=key.path, key=key.key, fingerprint=key.fingerprint,
        state="in_progress", created_at=now, locked_until=now + LEASE,
    )
    with services.store.transaction():
        if services.store.idempotency.claim(record):
            services.store.idempotency.complete(record, status_code=200, response=body)


def kept(services: Services, *, workspace_id: Any, key: IdempotencyKey) -> str | None:
    """A unit of work: what ``keep`` stored under ``key`` for the same caller (its fingerprint), if
    it is still kept."""
    record = services.store.idempotency.get(workspace_id, key.method, key.path, key.key)
    if record is None or record.state != "completed" or record.fingerprint != key.fingerprint:
        return None
    return record.response


def purge(services: Services) -> int:
    """Drop records older than ``RETENTION``, and the secrets of portal forms older than
    ``FORM_SECRET_RETENTION``; run by a periodic callback."""
    now = services.clock.now()
    with services.store.transaction():
        services.store.idempotency.forget_form_secrets(created_before=now - FORM_SECRET_RETENTION)
        return services.store.idempotency.purge(created_before=now - RETENTION)
