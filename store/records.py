"""Stored records. Fields marked ``internal`` never appear in API output (see core/wire.py)."""

from __future__ import annotations

import datetime as dt
import uuid

import attrs

from core.wire import INTERNAL

_internal = {INTERNAL: True}


@attrs.frozen
class Workspace:
    """A customer account; every other record belongs to exactly one."""

    id: uuid.UUID
    name: str
    created_at: dt.datetime


@attrs.frozen
class User:
    """A human, known by e-mail until the first sign-in binds an issuer and subject."""

    id: uuid.UUID
    email: str
    created_at: dt.datetime
    issuer: str | None = None
    subject: str | None = None


@attrs.frozen
class Membership:
    """A user's role in one workspace."""

    workspace_id: uuid.UUID
    user_id: uuid.UUID
    role: str
    created_at: dt.datetime


@attrs.frozen
class ApiKey:
    """Metadata of an ``ac_live_`` key; the secret itself is never stored."""

    id: uuid.UUID
    name: str
    prefix: str
    "Leading characters of the key, for recognising it in a list."
    scopes: list[str]
    created_at: dt.datetime
    status: str
    "``active`` or ``revoked`` as stored; ``expired`` is derived from ``expires_at`` when shown."
    workspace_id: uuid.UUID = attrs.field(metadata=_internal)
    secret_hash: str = attrs.field(metadata=_internal)
    "HMAC-SHA256 of the full key under a subkey of the master secret."
    last_used_at: dt.datetime | None = None
    expires_at: dt.datetime | None = None
    revoked_at: dt.datetime | None = attrs.field(default=None, metadata=_internal)
