"""Idempotency-Key records: an atomic claim, a lease, the stored response, a purge."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

from store._rows import from_ts, postgres, select, ts, uid
from store.records import IdempotencyRecord

if TYPE_CHECKING:
    from store.sqlite.connection import Database

_KEY = "workspace_id = ? AND method = ? AND path = ? AND key = ?"


def _record(r: dict[str, Any]) -> IdempotencyRecord:
    return IdempotencyRecord(
        workspace_id=uuid.UUID(r["workspace_id"]),
        method=r["method"],
        path=r["path"],
        key=r["key"],
        fingerprint=r["fingerprint"],
        state=r["state"],
        created_at=from_ts(r["created_at"]),
        locked_until=from_ts(r["locked_until"]),
        status_code=r["status_code"],
        response=r["response"],
    )


def _key(record: IdempotencyRecord) -> list[Any]:
    return [uid(record.workspace_id), record.method, record.path, record.key]


class IdempotencyRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def claim(self, record: IdempotencyRecord) -> bool:
        """Insert an in-progress record; false when the key is already taken (one statement, so
        two concurrent requests can never both win)."""
        cursor = self.db.execute(
            """INSERT INTO idempotency_keys
                   (workspace_id, method, path, key, fingerprint, state, locked_until, created_at)
               VALUES (?, ?, ?, ?, ?, 'in_progress', ?, ?) ON CONFLICT DO NOTHING""",
            [*_key(record), record.fingerprint, ts(record.locked_until), ts(record.created_at)],
        )
        return cursor.rowcount == 1

    def get(self, workspace_id: uuid.UUID, method: str, path: str, key: str) -> IdempotencyRecord | None:
        rows = select(self.db, f"SELECT * FROM idempotency_keys WHERE {_KEY}", [uid(workspace_id), method, path, key])
        return _record(rows[0]) if rows else None

    def reclaim(self, record: IdempotencyRecord, *, now: dt.datetime, locked_until: dt.datetime) -> bool:
        """Take over an in-progress claim whose lease ran out (its holder crashed); false when
        someone else took it first or it completed meanwhile."""
        cursor = self.db.execute(
            f"""UPDATE idempotency_keys SET locked_until = ?
                WHERE {_KEY} AND state = 'in_progress' AND locked_until <= ?""",
            [ts(locked_until), *_key(record), ts(now)],
        )
        return cursor.rowcount == 1

    def complete(self, record: IdempotencyRecord, *, status_code: int, response: str) -> None:
        self.db.execute(
            f"""UPDATE idempotency_keys SET state = 'completed', locked_until = NULL, status_code = ?, response = ?
                WHERE {_KEY}""",
            [status_code, response, *_key(record)],
        )

    def release(self, record: IdempotencyRecord) -> None:
        """Drop an unfinished claim so that a retry runs the operation again."""
        self.db.execute(f"DELETE FROM idempotency_keys WHERE {_KEY} AND state = 'in_progress'", _key(record))

    def purge(self, *, created_before: dt.datetime) -> int:
        """Remove completed records older than the cut-off (and abandoned claims as old)."""
        cursor = self.db.execute("DELETE FROM idempotency_keys WHERE created_at < ?", [ts(created_before)])
        return cursor.rowcount

    def forget_form_secrets(self, *, created_before: dt.datetime) -> int:
        """Drop the secrets portal forms keep for a duplicate submission (handlers/portal/forms.py)."""
        if postgres(self.db):
            sql = """UPDATE idempotency_keys SET response = (response::jsonb - 'secret')::text
                     WHERE method = 'FORM' AND created_at < ? AND (response::jsonb ->> 'secret') IS NOT NULL"""
        else:
            sql = """UPDATE idempotency_keys SET response = json_remove(response, '$.secret')
                     WHERE method = 'FORM' AND created_at < ? AND json_extract(response, '$.secret') IS NOT NULL"""
        cursor = self.db.execute(sql, [ts(created_before)])
        return cursor.rowcount
