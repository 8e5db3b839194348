"""The background checks' schedule, kept on the domains themselves (``next_check_at``).

A check is claimed by pushing ``next_check_at`` forward to the end of a lease in the same
statement that finds it due, so two processes on one database never check one domain at once,
and a process that dies mid-check leaves the domain due again once its lease runs out.
"""

from __future__ import annotations

import datetime as dt
import uuid

import sqlite_utils

from store._rows import from_ts, postgres, ts, uid
from store.domains import DomainRepo


class LifecycleRepo:
    def __init__(self, db: sqlite_utils.Database, domains: DomainRepo) -> None:
        self.db = db
        self.domains = domains

    def claim(self, now: dt.datetime, lease_until: dt.datetime, limit: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """The ``limit`` soonest due domains (in no particular order), leased until ``lease_until``:
        (workspace, domain). Call it in ``store.transaction(row_locked=True)``: on
        PostgreSQL its row locks keep processes claiming at once apart, where SERIALIZABLE claims
        abort each other (a third of them with two processes, measured), past a unit's retries."""
        rows = self.db.execute(
            """UPDATE domains SET next_check_at = ?
               WHERE id IN (SELECT id FROM domains WHERE next_check_at <= ? ORDER BY next_check_at LIMIT ?"""
            # Another process's claim in progress is passed over, not waited for.
            + (" FOR UPDATE SKIP LOCKED" if postgres(self.db) else "")
            + """)
               RETURNING workspace_id, id""",
            [ts(lease_until), ts(now), limit],
        ).fetchall()
        claimed = [(uuid.UUID(w), uuid.UUID(d)) for w, d in rows]
        self.domains.forget([d for _, d in claimed])
        return claimed

    def release(self, domain_id: uuid.UUID, lease_until: dt.datetime, due_at: dt.datetime) -> None:
        """Give a claimed domain back unchecked (the process is stopping), due at ``due_at``."""
        self.db.execute("UPDATE domains SET next_check_at = ? WHERE id = ? AND next_check_at = ?",
                        [ts(due_at), uid(domain_id), ts(lease_until)])
        self.domains.forget([domain_id])

    def due(self, now: dt.datetime) -> tuple[int, dt.datetime | None]:
        """How many checks are due, and since when the oldest has been."""
        count, oldest = self.db.execute(
            "SELECT count(*), min(next_check_at) FROM domains WHERE next_check_at <= ?", [ts(now)]
        ).fetchone()
        return count, from_ts(oldest) if oldest else None

    def drifted(self) -> int:
        """Verified domains whose delegation or CAA a check found wrong."""
        [count] = self.db.execute("SELECT count(*) FROM domains WHERE drift IS NOT NULL").fetchone()
        return int(count)
