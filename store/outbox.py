"""The transactional outbox: events written with the state change they report."""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from store._rows import from_ts, postgres, select, ts, uid
from store.records import OutboxEvent

if TYPE_CHECKING:
    from store.sqlite.connection import Database


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
    """Events waiting for fan-out. Whoever delivers them can ``listen``: listeners are called after
    a transaction that wrote events commits, so a new event need not wait for the next poll."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.listeners: list[Callable[[], None]] = []
        self._local = threading.local()  # per transaction; on PostgreSQL several run at once

    @property
    def written(self) -> bool:
        """Whether the transaction in progress on this thread wrote events."""
        return getattr(self._local, "written", False)

    def listen(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after a transaction of this process that wrote events commits: on
        the thread that committed (a worker thread on PostgreSQL)."""
        self.listeners.append(callback)

    def committed(self, *, kept: bool) -> None:
        """Called by the store when a transaction ends; ``kept`` is false after a rollback."""
        written, self._local.written = self.written, False
        if written and kept:
            self.notify()

    def notify(self) -> None:
        """Tell the listeners there is something to deliver."""
        for callback in self.listeners:
            callback()

    def insert(self, event: OutboxEvent) -> None:
        self._local.written = True
        self.db.execute(
            "INSERT INTO outbox_events (id, workspace_id, type, data, created_at, dispatched_at) VALUES (?, ?, ?, ?, ?, ?)",
            [uid(event.id), uid(event.workspace_id), event.type, json.dumps(event.data), ts(event.created_at),
             ts(event.dispatched_at)],
        )

    def undispatched(self, limit: int = 100) -> list[OutboxEvent]:
        """Events not yet turned into deliveries, oldest first. On PostgreSQL they are locked until
        the transaction ends and another process's are passed over: call it in a transaction
        with ``row_locked=True``."""
        rows = select(
            self.db,
            "SELECT * FROM outbox_events WHERE dispatched_at IS NULL ORDER BY created_at, id LIMIT ?"
            + (" FOR UPDATE SKIP LOCKED" if postgres(self.db) else ""),
            [limit],
        )
        return [_event(r) for r in rows]

    def mark_dispatched(self, event_id: uuid.UUID, at: dt.datetime) -> None:
        self.db.execute("UPDATE outbox_events SET dispatched_at = ? WHERE id = ?", [ts(at), uid(event_id)])

    def for_workspace(self, workspace_id: uuid.UUID) -> list[OutboxEvent]:
        """All of a workspace's events, oldest first."""
        rows = select(
            self.db, "SELECT * FROM outbox_events WHERE workspace_id = ? ORDER BY created_at, id", [uid(workspace_id)]
        )
        return [_event(r) for r in rows]
