"""Verification links: the keyed hash and the encrypted copy of each token, never the token."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

from store._rows import from_ts, select, ts, uid
from store.records import VerificationLinkRow

if TYPE_CHECKING:
    from store.sqlite.connection import Database

_SELECT = """SELECT verification_links.*, domains.apex AS apex
             FROM verification_links JOIN domains ON domains.id = verification_links.domain_id"""


def _link(r: dict[str, Any]) -> VerificationLinkRow:
    return VerificationLinkRow(
        id=uuid.UUID(r["id"]),
        workspace_id=uuid.UUID(r["workspace_id"]),
        domain_id=uuid.UUID(r["domain_id"]),
        apex=r["apex"],
        token_hash=r["token_hash"],
        token_ciphertext=r["token_ciphertext"],
        recipient_email=r["recipient_email"],
        created_at=from_ts(r["created_at"]),
        expires_at=from_ts(r["expires_at"]),
        last_reminded_at=from_ts(r["last_reminded_at"]),
        revoked_at=from_ts(r["revoked_at"]),
    )


class VerificationLinkRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(self, link: VerificationLinkRow) -> None:
        self.db.execute(
            """INSERT INTO verification_links (id, workspace_id, domain_id, token_hash, token_ciphertext,
                   recipient_email, created_at, expires_at, last_reminded_at, revoked_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [uid(link.id), uid(link.workspace_id), uid(link.domain_id), link.token_hash, link.token_ciphertext,
             link.recipient_email, ts(link.created_at), ts(link.expires_at), ts(link.last_reminded_at),
             ts(link.revoked_at)],
        )

    def get(self, workspace_id: uuid.UUID, link_id: uuid.UUID) -> VerificationLinkRow | None:
        """A link of this workspace; another workspace's link is as good as missing."""
        rows = select(
            self.db, f"{_SELECT} WHERE verification_links.id = ? AND verification_links.workspace_id = ?",
            [uid(link_id), uid(workspace_id)],
        )
        return _link(rows[0]) if rows else None

    def by_hash(self, token_hash: str) -> VerificationLinkRow | None:
        rows = select(self.db, f"{_SELECT} WHERE verification_links.token_hash = ?", [token_hash])
        return _link(rows[0]) if rows else None

    @staticmethod
    def _filter(workspace_id: uuid.UUID, domain_id: uuid.UUID | None, status: str | None,
                now: dt.datetime) -> tuple[str, list[Any]]:
        """The WHERE clause of a listing; ``status`` is judged as ``core.verification_links.status_of`` does."""
        where, params = "verification_links.workspace_id = ?", [uid(workspace_id)]
        if domain_id is not None:
            where, params = where + " AND verification_links.domain_id = ?", [*params, uid(domain_id)]
        if status == "revoked":
            where += " AND verification_links.revoked_at IS NOT NULL"
        elif status == "active":
            where, params = where + " AND verification_links.revoked_at IS NULL AND verification_links.expires_at > ?", [*params, ts(now)]
        elif status == "expired":
            where, params = where + " AND verification_links.revoked_at IS NULL AND verification_links.expires_at <= ?", [*params, ts(now)]
        return where, params

    def page(self, workspace_id: uuid.UUID, *, domain_id: uuid.UUID | None, status: str | None, now: dt.datetime,
             after: tuple[str, str] | None, limit: int) -> list[tuple[VerificationLinkRow, tuple[str, str]]]:
        """Newest first (links of the same millisecond in reverse order of insertion), strictly after
        the (created_at, rowid) key of the last row shown; each row with its own key."""
        where, params = self._filter(workspace_id, domain_id, status, now)
        if after is not None:
            where += " AND (verification_links.created_at, verification_links.rowid) < (?, ?)"
            params += [after[0], int(after[1])]  # a signed cursor: our own key
        rows = select(self.db, f"""SELECT verification_links.*, domains.apex AS apex, verification_links.rowid AS position
                                    FROM verification_links JOIN domains ON domains.id = verification_links.domain_id
                                    WHERE {where}
                                    ORDER BY verification_links.created_at DESC, verification_links.rowid DESC LIMIT ?""",
                      [*params, limit])
        return [(_link(r), (r["created_at"], str(r["position"]))) for r in rows]

    def count(self, workspace_id: uuid.UUID, *, domain_id: uuid.UUID | None, status: str | None, now: dt.datetime) -> int:
        where, params = self._filter(workspace_id, domain_id, status, now)
        return int(self.db.execute(f"SELECT count(*) FROM verification_links WHERE {where}", params).fetchone()[0])

    def reminders_since(self, recipient: str, since: dt.datetime) -> list[dt.datetime]:
        """When reminders went to ``recipient`` after ``since``, oldest first."""
        rows = self.db.execute(
            "SELECT sent_at FROM reminder_sends WHERE recipient = ? AND sent_at > ? ORDER BY sent_at", [recipient, ts(since)]
        ).fetchall()
        return [from_ts(sent_at) for (sent_at,) in rows]

    def record_reminder(self, recipient: str, at: dt.datetime, *, forget_before: dt.datetime) -> int:
        """Count a reminder to ``recipient`` (its id, to take it back if it is not sent), dropping
        every row too old to count any more: the table holds about one day of reminders."""
        self.db.execute("DELETE FROM reminder_sends WHERE sent_at <= ?", [ts(forget_before)])
        [reminder_id] = self.db.execute(
            "INSERT INTO reminder_sends (recipient, sent_at) VALUES (?, ?) RETURNING rowid", [recipient, ts(at)]
        ).fetchone()
        return int(reminder_id)

    def forget_reminder(self, reminder_id: int) -> None:
        self.db.execute("DELETE FROM reminder_sends WHERE rowid = ?", [reminder_id])

    def set_reminded(self, link_id: uuid.UUID, at: dt.datetime) -> None:
        self.db.execute("UPDATE verification_links SET last_reminded_at = ? WHERE id = ?", [ts(at), uid(link_id)])

    def revoke(self, link_id: uuid.UUID, at: dt.datetime) -> None:
        """Mark a link revoked; one revoked already keeps its first ``revoked_at``."""
        self.db.execute(
            "UPDATE verification_links SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", [ts(at), uid(link_id)]
        )
