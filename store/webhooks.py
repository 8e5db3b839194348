"""Webhook endpoints, their deliveries and every attempt."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import TYPE_CHECKING, Any

from store._rows import from_ts, postgres, select, ts, uid
from store.records import WebhookAttempt, WebhookDelivery, WebhookEndpoint

if TYPE_CHECKING:
    from store.sqlite.connection import Database


def _endpoint(r: dict[str, Any]) -> WebhookEndpoint:
    return WebhookEndpoint(
        id=uuid.UUID(r["id"]),
        workspace_id=uuid.UUID(r["workspace_id"]),
        url=r["url"],
        events=json.loads(r["events"]),
        status=r["status"],
        secret_ciphertext=r["secret_ciphertext"],
        created_at=from_ts(r["created_at"]),
        updated_at=from_ts(r["updated_at"]),
        last_delivery_at=from_ts(r["last_delivery_at"]),
        last_status_code=r["last_status_code"],
    )


def _delivery(r: dict[str, Any]) -> WebhookDelivery:
    return WebhookDelivery(
        id=uuid.UUID(r["id"]),
        workspace_id=uuid.UUID(r["workspace_id"]),
        endpoint_id=uuid.UUID(r["endpoint_id"]),
        event_id=uuid.UUID(r["event_id"]),
        type=r["type"],
        data=json.loads(r["data"]),
        status=r["status"],
        attempt_count=r["attempts"],
        next_attempt_at=from_ts(r["next_attempt_at"]),
        created_at=from_ts(r["created_at"]),
        last_attempt_at=from_ts(r["last_attempt_at"]),
        last_status_code=r["last_status_code"],
        last_error=r["last_error"],
    )


class WebhookRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    # --- endpoints ----------------------------------------------------------------------------

    def insert_endpoint(self, e: WebhookEndpoint) -> None:
        self.db.execute(
            """INSERT INTO webhook_endpoints (id, workspace_id, url, events, status, secret_ciphertext,
                   created_at, updated_at, last_delivery_at, last_status_code)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [uid(e.id), uid(e.workspace_id), e.url, json.dumps(e.events), e.status, e.secret_ciphertext,
             ts(e.created_at), ts(e.updated_at), ts(e.last_delivery_at), e.last_status_code],
        )

    def update_endpoint(self, e: WebhookEndpoint) -> None:
        self.db.execute(
            """UPDATE webhook_endpoints SET url = ?, events = ?, status = ?, secret_ciphertext = ?, updated_at = ?,
                   last_delivery_at = ?, last_status_code = ?
               WHERE id = ? AND workspace_id = ?""",
            [e.url, json.dumps(e.events), e.status, e.secret_ciphertext, ts(e.updated_at), ts(e.last_delivery_at),
             e.last_status_code, uid(e.id), uid(e.workspace_id)],
        )

    def get_endpoint(self, workspace_id: uuid.UUID, endpoint_id: uuid.UUID) -> WebhookEndpoint | None:
        """An endpoint of this workspace; another workspace's is as good as missing."""
        rows = select(
            self.db, "SELECT * FROM webhook_endpoints WHERE id = ? AND workspace_id = ?", [uid(endpoint_id), uid(workspace_id)]
        )
        return _endpoint(rows[0]) if rows else None

    def endpoints(self, workspace_id: uuid.UUID) -> list[WebhookEndpoint]:
        rows = select(
            self.db, "SELECT * FROM webhook_endpoints WHERE workspace_id = ? ORDER BY created_at, id", [uid(workspace_id)]
        )
        return [_endpoint(r) for r in rows]

    def delete_endpoint(self, workspace_id: uuid.UUID, endpoint_id: uuid.UUID) -> bool:
        cursor = self.db.execute(
            "DELETE FROM webhook_endpoints WHERE id = ? AND workspace_id = ?", [uid(endpoint_id), uid(workspace_id)]
        )
        return cursor.rowcount > 0

    def record_outcome(self, endpoint_id: uuid.UUID, *, at: dt.datetime, status_code: int | None) -> None:
        """``lastDeliveryAt`` and, when the receiver answered at all, ``lastStatusCode``."""
        self.db.execute(
            """UPDATE webhook_endpoints SET last_delivery_at = ?, last_status_code = coalesce(?, last_status_code)
               WHERE id = ?""",
            [ts(at), status_code, uid(endpoint_id)],
        )

    # --- deliveries ---------------------------------------------------------------------------

    def insert_delivery(self, d: WebhookDelivery) -> None:
        """Queue a delivery; a second one for the same (event, endpoint) is ignored."""
        self.db.execute(
            """INSERT INTO webhook_deliveries (id, workspace_id, endpoint_id, event_id, type, data, status, attempts,
                   next_attempt_at, created_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (event_id, endpoint_id) DO NOTHING""",
            [uid(d.id), uid(d.workspace_id), uid(d.endpoint_id), uid(d.event_id), d.type, json.dumps(d.data), d.status,
             d.attempt_count, ts(d.next_attempt_at), ts(d.created_at)],
        )

    def update_delivery(self, d: WebhookDelivery) -> None:
        self.db.execute(
            """UPDATE webhook_deliveries SET status = ?, attempts = ?, next_attempt_at = ?, last_attempt_at = ?,
                   last_status_code = ?, last_error = ?
               WHERE id = ?""",
            [d.status, d.attempt_count, ts(d.next_attempt_at), ts(d.last_attempt_at), d.last_status_code, d.last_error,
             uid(d.id)],
        )

    def claim_due(self, *, now: dt.datetime, lease_until: dt.datetime, limit: int) -> list[WebhookDelivery]:
        """Due deliveries of active endpoints, soonest due first, leased until ``lease_until``: a
        process that dies while sending leaves them to be sent again once the lease ends. Call it in
        ``store.transaction(row_locked=True)``: on PostgreSQL its row locks keep processes claiming
        at once apart, where SERIALIZABLE claims abort each other (a third of them with two
        processes, measured), past a unit's retries."""
        rows = select(
            self.db,
            """SELECT d.* FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
               WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND e.status = 'active'
               ORDER BY d.next_attempt_at, d.id LIMIT ?"""
            # Another process's claim in progress is passed over, not waited for.
            + (" FOR UPDATE OF d SKIP LOCKED" if postgres(self.db) else ""),
            [ts(now), limit],
        )
        if rows:
            self.db.execute(
                f"UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id IN ({', '.join('?' for _ in rows)})",
                [ts(lease_until), *(r["id"] for r in rows)],
            )
        return [_delivery({**r, "next_attempt_at": ts(lease_until)}) for r in rows]

    def get_delivery(self, endpoint_id: uuid.UUID, delivery_id: uuid.UUID, *, lock: bool = False) -> WebhookDelivery | None:
        """``lock``: the row stays this transaction's until it ends (PostgreSQL; SQLite's writer holds all)."""
        rows = select(
            self.db, "SELECT * FROM webhook_deliveries WHERE id = ? AND endpoint_id = ?"
            + (" FOR UPDATE" if lock and postgres(self.db) else ""), [uid(delivery_id), uid(endpoint_id)]
        )
        return _delivery(rows[0]) if rows else None

    def deliveries(
        self, endpoint_id: uuid.UUID, *, after: tuple[str, str] | None, limit: int
    ) -> list[WebhookDelivery]:
        """Newest first, strictly after the (created_at, id) key of the last row shown."""
        where, params = "endpoint_id = ?", [uid(endpoint_id)]
        if after is not None:
            where += " AND (created_at, id) < (?, ?)"  # a row value: read from the index at the key
            params += [after[0], after[1]]
        rows = select(
            self.db, f"SELECT * FROM webhook_deliveries WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ?", [*params, limit]
        )
        return [_delivery(r) for r in rows]

    def count_deliveries(self, endpoint_id: uuid.UUID) -> int:
        return int(self.db.execute("SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = ?", [uid(endpoint_id)]).fetchone()[0])

    def purge_delivered(self, *, before: dt.datetime) -> int:
        """Delete delivered deliveries last attempted before the cut-off (their attempts go with them)."""
        cursor = self.db.execute(
            "DELETE FROM webhook_deliveries WHERE status = 'delivered' AND last_attempt_at < ?", [ts(before)]
        )
        return cursor.rowcount

    @staticmethod
    def page_key(d: WebhookDelivery) -> tuple[str, str]:
        return ts(d.created_at) or "", str(d.id)

    # --- attempts -----------------------------------------------------------------------------

    def insert_attempt(self, delivery_id: uuid.UUID, a: WebhookAttempt) -> None:
        """Record an attempt, numbered after the delivery's previous ones (``a.number`` is ignored)."""
        self.db.execute(
            """INSERT INTO webhook_attempts (delivery_id, number, started_at, duration_ms, status_code, error)
               SELECT ?, coalesce(max(number), 0) + 1, ?, ?, ?, ? FROM webhook_attempts WHERE delivery_id = ?""",
            [uid(delivery_id), ts(a.started_at), a.duration_ms, a.status_code, a.error, uid(delivery_id)],
        )

    def attempts(self, delivery_id: uuid.UUID) -> list[WebhookAttempt]:
        rows = select(self.db, "SELECT * FROM webhook_attempts WHERE delivery_id = ? ORDER BY number", [uid(delivery_id)])
        return [
            WebhookAttempt(number=r["number"], started_at=from_ts(r["started_at"]), duration_ms=r["duration_ms"],
                           status_code=r["status_code"], error=r["error"])
            for r in rows
        ]
