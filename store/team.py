"""Team: memberships joined with users, and pending invitations."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from store._rows import from_ts, from_uid, select, ts, uid
from store.records import Invitation, Member

if TYPE_CHECKING:
    from store.sqlite.connection import Database


def _member(row: dict[str, Any]) -> Member:
    return Member(user_id=uuid.UUID(row["user_id"]), email=row["email"], role=row["role"], joined_at=from_ts(row["created_at"]))


def _invitation(row: dict[str, Any]) -> Invitation:
    return Invitation(
        id=uuid.UUID(row["id"]),
        workspace_id=uuid.UUID(row["workspace_id"]),
        email=row["email"],
        role=row["role"],
        created_at=from_ts(row["created_at"]),
        invited_by=from_uid(row["invited_by"]),
    )


_MEMBERS = """SELECT m.user_id, u.email, m.role, m.created_at FROM memberships m
              JOIN users u ON u.id = m.user_id WHERE m.workspace_id = ?"""


class TeamRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def members(self, workspace_id: uuid.UUID) -> list[Member]:
        return [_member(r) for r in select(self.db, _MEMBERS + " ORDER BY m.created_at, u.email", [uid(workspace_id)])]

    def member(self, workspace_id: uuid.UUID, user_id: uuid.UUID) -> Member | None:
        rows = select(self.db, _MEMBERS + " AND m.user_id = ?", [uid(workspace_id), uid(user_id)])
        return _member(rows[0]) if rows else None

    def member_by_email(self, workspace_id: uuid.UUID, email: str) -> Member | None:
        rows = select(self.db, _MEMBERS + " AND u.email = ?", [uid(workspace_id), email])
        return _member(rows[0]) if rows else None

    def owner_count(self, workspace_id: uuid.UUID) -> int:
        return int(self.db.execute(
            "SELECT count(*) FROM memberships WHERE workspace_id = ? AND role = 'owner'", [uid(workspace_id)]
        ).fetchone()[0])

    def set_role(self, workspace_id: uuid.UUID, user_id: uuid.UUID, role: str) -> None:
        self.db.execute(
            "UPDATE memberships SET role = ? WHERE workspace_id = ? AND user_id = ?", [role, uid(workspace_id), uid(user_id)]
        )

    def remove_member(self, workspace_id: uuid.UUID, user_id: uuid.UUID) -> None:
        self.db.execute("DELETE FROM memberships WHERE workspace_id = ? AND user_id = ?", [uid(workspace_id), uid(user_id)])

    def invitations(self, workspace_id: uuid.UUID) -> list[Invitation]:
        rows = select(self.db, "SELECT * FROM invitations WHERE workspace_id = ? ORDER BY created_at, email", [uid(workspace_id)])
        return [_invitation(r) for r in rows]

    def invitations_for_email(self, email: str) -> list[Invitation]:
        rows = select(self.db, "SELECT * FROM invitations WHERE email = ? ORDER BY created_at", [email])
        return [_invitation(r) for r in rows]

    def invitation(self, workspace_id: uuid.UUID, invitation_id: uuid.UUID) -> Invitation | None:
        rows = select(
            self.db, "SELECT * FROM invitations WHERE id = ? AND workspace_id = ?", [uid(invitation_id), uid(workspace_id)]
        )
        return _invitation(rows[0]) if rows else None

    def invitation_by_email(self, workspace_id: uuid.UUID, email: str) -> Invitation | None:
        rows = select(self.db, "SELECT * FROM invitations WHERE workspace_id = ? AND email = ?", [uid(workspace_id), email])
        return _invitation(rows[0]) if rows else None

    def insert_invitation(self, invitation: Invitation) -> None:
        self.db.execute(
            "INSERT INTO invitations (id, workspace_id, email, role, created_at, invited_by) VALUES (?, ?, ?, ?, ?, ?)",
            [uid(invitation.id), uid(invitation.workspace_id), invitation.email, invitation.role,
             ts(invitation.created_at), uid(invitation.invited_by)],
        )

    def delete_invitation(self, invitation_id: uuid.UUID) -> None:
        self.db.execute("DELETE FROM invitations WHERE id = ?", [uid(invitation_id)])
