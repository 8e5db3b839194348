"""Clients: the records domains can be filed under."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from store._rows import from_ts, select, ts, uid
from store.records import Client

if TYPE_CHECKING:
    from store.sqlite.connection import Database


def _client(row: dict[str, Any]) -> Client:
    return Client(
        id=uuid.UUID(row["id"]),
        workspace_id=uuid.UUID(row["workspace_id"]),
        name=row["name"],
        notes=row["notes"],
        created_at=from_ts(row["created_at"]),
        updated_at=from_ts(row["updated_at"]),
    )


class ClientRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(self, client: Client) -> None:
        self.db.execute(
            "INSERT INTO clients (id, workspace_id, name, notes, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            [uid(client.id), uid(client.workspace_id), client.name, client.notes, ts(client.created_at), ts(client.updated_at)],
        )

    def get(self, workspace_id: uuid.UUID, client_id: uuid.UUID) -> Client | None:
        rows = select(
            self.db,
            "SELECT * FROM clients WHERE id = ? AND workspace_id = ?", [uid(client_id), uid(workspace_id)]
        )
        return _client(rows[0]) if rows else None

    def list(self, workspace_id: uuid.UUID) -> list[Client]:
        rows = select(
            self.db,
            "SELECT * FROM clients WHERE workspace_id = ? ORDER BY lower(name), id", [uid(workspace_id)]
        )
        return [_client(r) for r in rows]

    def update(self, client: Client) -> None:
        self.db.execute(
            "UPDATE clients SET name = ?, notes = ?, updated_at = ? WHERE id = ? AND workspace_id = ?",
            [client.name, client.notes, ts(client.updated_at), uid(client.id), uid(client.workspace_id)],
        )

    def delete(self, workspace_id: uuid.UUID, client_id: uuid.UUID) -> None:
        self.db.execute("DELETE FROM clients WHERE id = ? AND workspace_id = ?", [uid(client_id), uid(workspace_id)])

    def domain_count(self, client_id: uuid.UUID) -> int:
        return int(self.db.execute("SELECT count(*) FROM domains WHERE client_id = ?", [uid(client_id)]).fetchone()[0])
