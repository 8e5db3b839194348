"""The transactional outbox: events written with the state change they report."""

from __future__ import annotations

import json
import uuid
from typing import Any

import sqlite_utils

from store._rows import from_ts, select, ts, uid
from store.records import OutboxEvent


def _event(r: dict[str, Any]) -> OutboxEvent:
    return OutboxEvent(
        id=uuid.UUID(r["id"]),
        workspace_id=uuid.UUID(r["workspace_id"]),
        type=r["type"],
        data=json.loads(r["data"]),
        created_at=from_ts(r["created_at"]),
        dispatched_at=from_ts(r["dispatched_at"]),
    )


class OutboxRepo:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    def insert(self, event: OutboxEvent) -> None:
        self.db.execute(
            "INSERT INTO outbox_events (id, workspace_id, type, data, created_at, dispatched_at) VALUES (?, ?, ?, ?, ?, ?)",
            [uid(event.id), uid(event.workspace_id), event.type, json.dumps(event.data), ts(event.created_at),
             ts(event.dispatched_at)],
        )

    def undispatched(self, limit: int = 100) -> list[OutboxEvent]:
        """Events not yet turned into deliveries, oldest first."""
        rows = select(
            self.db,
            "SELECT * FROM outbox_events WHERE dispatched_at IS NULL ORDER BY created_at, id LIMIT ?",
            [limit],
        )
        return [_event(r) for r in rows]

    def for_workspace(self, workspace_id: uuid.UUID) -> list[OutboxEvent]:
        """All of a workspace's events, oldest first."""
        rows = select(
            self.db, "SELECT * FROM outbox_events WHERE workspace_id = ? ORDER BY created_at, id", [uid(workspace_id)]
        )
        return [_event(r) for r in rows]
