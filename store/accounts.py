"""Workspaces, users and memberships."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from store._rows import from_ts, from_uid, postgres, select, ts, uid
from store.records import Membership, User, Workspace

if TYPE_CHECKING:
    from store.sqlite.connection import Database


def _workspace(row: dict[str, Any]) -> Workspace:
    return Workspace(
        id=uuid.UUID(row["id"]),
        name=row["name"],
        created_at=from_ts(row["created_at"]),
        ownership_token=row["ownership_token"],
    )


def _user(row: dict[str, Any]) -> User:
    return User(
        id=uuid.UUID(row["id"]),
        email=row["email"],
        created_at=from_ts(row["created_at"]),
        issuer=row["issuer"],
        subject=row["subject"],
    )


def _membership(row: dict[str, Any]) -> Membership:
    return Membership(
        workspace_id=from_uid(row["workspace_id"]),
        user_id=from_uid(row["user_id"]),
        role=row["role"],
        created_at=from_ts(row["created_at"]),
    )


class AccountRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def insert_workspace(self, workspace: Workspace) -> None:
        self.db.execute(
            "INSERT INTO workspaces (id, name, created_at, ownership_token) VALUES (?, ?, ?, ?)",
            [uid(workspace.id), workspace.name, ts(workspace.created_at), workspace.ownership_token],
        )

    def get_workspace(self, workspace_id: uuid.UUID) -> Workspace | None:
        rows = select(self.db, "SELECT * FROM workspaces WHERE id = ?", [uid(workspace_id)])
        return _workspace(rows[0]) if rows else None

    def workspace_with_token(self, token: str) -> uuid.UUID | None:
        """The workspace whose ownership token this is (tokens are random: at most one)."""
        rows = select(self.db, "SELECT id FROM workspaces WHERE ownership_token = ?", [token])
        return uuid.UUID(rows[0]["id"]) if rows else None

    def insert_user(self, user: User) -> None:
        self.db.execute(
            "INSERT INTO users (id, email, issuer, subject, created_at) VALUES (?, ?, ?, ?, ?)",
            [uid(user.id), user.email, user.issuer, user.subject, ts(user.created_at)],
        )

    def get_user(self, user_id: uuid.UUID) -> User | None:
        rows = select(self.db, "SELECT * FROM users WHERE id = ?", [uid(user_id)])
        return _user(rows[0]) if rows else None

    def unbind_users(self, *, email: str | None = None, issuer: str | None = None) -> list[str]:
        """Forget the identity of the user with this e-mail, or of every user of this issuer.

        The e-mails of the users unbound, whose next sign-in with a verified e-mail binds again.
        """
        where, params = ("email = ?", [email]) if email is not None else ("issuer = ?", [issuer])
        rows = select(self.db, f"SELECT email FROM users WHERE subject IS NOT NULL AND {where} ORDER BY email", params)
        self.db.execute(f"UPDATE users SET issuer = NULL, subject = NULL WHERE subject IS NOT NULL AND {where}", params)
        return [r["email"] for r in rows]

    def user_by_email(self, email: str) -> User | None:
        rows = select(self.db, "SELECT * FROM users WHERE email = ?", [email])
        return _user(rows[0]) if rows else None

    def user_by_subject(self, issuer: str, subject: str) -> User | None:
        rows = select(self.db, "SELECT * FROM users WHERE issuer = ? AND subject = ?", [issuer, subject])
        return _user(rows[0]) if rows else None

    def link_user(self, user_id: uuid.UUID, *, issuer: str, subject: str) -> None:
        """Bind a user to an identity; only a user not yet bound can be linked."""
        self.db.execute(
            "UPDATE users SET issuer = ?, subject = ? WHERE id = ? AND subject IS NULL",
            [issuer, subject, uid(user_id)],
        )

    def insert_membership(self, membership: Membership) -> None:
        self.db.execute(
            "INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES (?, ?, ?, ?)",
            [uid(membership.workspace_id), uid(membership.user_id), membership.role, ts(membership.created_at)],
        )

    def memberships_of_user(self, user_id: uuid.UUID) -> list[Membership]:
        """Oldest first: a session acts in the user's first workspace."""
        rows = select(
            self.db,
            "SELECT * FROM memberships WHERE user_id = ? ORDER BY created_at, rowid",
            [uid(user_id)],
        )
        return [_membership(r) for r in rows]

    def joined(self, user_id: uuid.UUID) -> list[tuple[Membership, Workspace]]:
        """The user's memberships with their workspaces, oldest first, in one read (every session
        request makes it)."""
        rows = select(
            self.db,
            """SELECT m.workspace_id, m.user_id, m.role, m.created_at, w.id, w.name, w.created_at AS w_created_at,
                      w.ownership_token
               FROM memberships m JOIN workspaces w ON w.id = m.workspace_id
               WHERE m.user_id = ? ORDER BY m.created_at, m.rowid""",
            [uid(user_id)],
        )
        return [(_membership(r), _workspace({**r, "created_at": r["w_created_at"]})) for r in rows]

    def workspaces_with_owners(self, *, member_email: str | None = None) -> list[tuple[Workspace, list[str]]]:
        """Every workspace (or those ``member_email`` belongs to), oldest first, with its owners' e-mails."""
        where, params = "", []
        if member_email is not None:
            where = """WHERE w.id IN (SELECT m.workspace_id FROM memberships m JOIN users u ON u.id = m.user_id
                                      WHERE u.email = ?)"""
            params = [member_email]
        # The owners in the order of the subquery: SQLite's group_concat keeps it; PostgreSQL's
        # string_agg is told it.
        concat = "string_agg(email, ' ' ORDER BY n)" if postgres(self.db) else "group_concat(email, ' ')"
        rows = select(
            self.db,
            f"""SELECT w.*, (SELECT {concat} FROM (
                    SELECT u.email, row_number() OVER (ORDER BY m.created_at, u.email) AS n
                    FROM memberships m JOIN users u ON u.id = m.user_id
                    WHERE m.workspace_id = w.id AND m.role = 'owner' ORDER BY m.created_at, u.email) AS o) AS owners
                FROM workspaces w {where} ORDER BY w.created_at, w.id""",
            params,
        )
        return [(_workspace(r), (r["owners"] or "").split()) for r in rows]

    def owner_email(self, workspace_id: uuid.UUID) -> str | None:
        """The e-mail of the workspace's first owner."""
        rows = select(
            self.db,
            """SELECT users.email FROM memberships JOIN users ON users.id = memberships.user_id
               WHERE memberships.workspace_id = ? AND memberships.role = 'owner'
               ORDER BY memberships.created_at LIMIT 1""",
            [uid(workspace_id)],
        )
        return rows[0]["email"] if rows else None
