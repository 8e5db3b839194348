"""API keys: metadata and the keyed hash of each secret."""

from __future__ import annotations

import builtins
import datetime as dt
import json
import uuid
from typing import TYPE_CHECKING, Any

from store._rows import from_ts, select, ts, uid
from store.records import ApiKey, Workspace

if TYPE_CHECKING:
    from store.sqlite.connection import Database


def _key(row: dict[str, Any]) -> ApiKey:
    return ApiKey(
        id=uuid.UUID(row["id"]),
        workspace_id=uuid.UUID(row["workspace_id"]),
        name=row["name"],
        prefix=row["prefix"],
        secret_hash=row["secret_hash"],
        scopes=json.loads(row["scopes"]),
        status=row["status"],
        created_at=from_ts(row["created_at"]),
        expires_at=from_ts(row["expires_at"]),
        last_used_at=from_ts(row["last_used_at"]),
        revoked_at=from_ts(row["revoked_at"]),
    )


class ApiKeyRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(self, key: ApiKey) -> None:
        self.db.execute(
            """INSERT INTO api_keys (id, workspace_id, name, prefix, secret_hash, scopes, status,
                   created_at, expires_at, last_used_at, revoked_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [
                uid(key.id), uid(key.workspace_id), key.name, key.prefix, key.secret_hash,
                json.dumps(key.scopes), key.status, ts(key.created_at), ts(key.expires_at),
                ts(key.last_used_at), ts(key.revoked_at),
            ],
        )

    def list(self, workspace_id: uuid.UUID) -> list[ApiKey]:
        rows = select(
            self.db,
            "SELECT * FROM api_keys WHERE workspace_id = ? ORDER BY created_at DESC, id",
            [uid(workspace_id)],
        )
        return [_key(r) for r in rows]

    def get(self, workspace_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey | None:
        """A key of this workspace; another workspace's key is as good as missing."""
        rows = select(
            self.db,
            "SELECT * FROM api_keys WHERE id = ? AND workspace_id = ?",
            [uid(key_id), uid(workspace_id)],
        )
        return _key(rows[0]) if rows else None

    def with_prefix(self, prefix: str) -> builtins.list[tuple[ApiKey, Workspace]]:  # list: the method above
        """Keys with this display prefix, each with its workspace (one read on the hot path)."""
        rows = select(
            self.db,
            """SELECT k.*, w.name AS w_name, w.created_at AS w_created_at, w.ownership_token AS w_token
               FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id WHERE k.prefix = ?""",
            [prefix],
        )
        return [
            (
                _key(r),
                Workspace(
                    id=uuid.UUID(r["workspace_id"]),
                    name=r["w_name"],
                    created_at=from_ts(r["w_created_at"]),
                    ownership_token=r["w_token"],
                ),
            )
            for r in rows
        ]

    def replace_secret(self, key_id: uuid.UUID, *, prefix: str, secret_hash: str) -> None:
        self.db.execute(
            "UPDATE api_keys SET prefix = ?, secret_hash = ? WHERE id = ?",
            [prefix, secret_hash, uid(key_id)],
        )

    def revoke(self, key_id: uuid.UUID, at: dt.datetime) -> None:
        self.db.execute(
            "UPDATE api_keys SET status = 'revoked', revoked_at = ? WHERE id = ? AND status = 'active'",
            [ts(at), uid(key_id)],
        )

    def touch(self, key_id: uuid.UUID, at: dt.datetime) -> None:
        self.db.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", [ts(at), uid(key_id)])
