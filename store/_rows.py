"""Conversions between Python values and SQLite columns, shared by the repositories."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any, overload

from core.wire import format_timestamp

if TYPE_CHECKING:
    from store.sqlite.connection import Database


def ts(value: dt.datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


@overload
def from_ts(value: str) -> dt.datetime: ...
@overload
def from_ts(value: str | None) -> dt.datetime | None: ...
def from_ts(value: str | None) -> dt.datetime | None:
    # Stored timestamps are always written by ts(): UTC with a "Z", which fromisoformat reads
    # as an aware UTC datetime directly (the hot paths read several per row).
    return None if value is None else dt.datetime.fromisoformat(value)


def uid(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)


@overload
def from_uid(value: str) -> uuid.UUID: ...
@overload
def from_uid(value: str | None) -> uuid.UUID | None: ...
def from_uid(value: str | None) -> uuid.UUID | None:
    return None if value is None else uuid.UUID(value)


def postgres(db: Any) -> bool:
    """Whether the repositories' connection is PostgreSQL's (store/postgres/pool.py), for the few
    statements spelled differently there."""
    return getattr(db, "dialect", "sqlite") == "postgresql"


def select(db: Database, sql: str, params: list[Any] | tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Rows as dicts, read with the connection's ``execute`` (SQLite's, or the PostgreSQL pool's).

    sqlite-utils' ``query()`` wraps every SELECT in a savepoint (three statements per read);
    reads here need none of that, and the hot paths (authentication, GET) feel it.
    """
    cursor = db.execute(sql, params)
    names = [d[0] for d in cursor.description]
    # fetchall, not the cursor's iterator: psycopg steps an iterator in Python, row by row, and a
    # page of 100 domains spent a third of its reading there (issue 49).
    return [dict(zip(names, row)) for row in cursor.fetchall()]
