"""Totals counted row by row, kept on SQLite until the database changes.

Each page of a ``q`` that matches a third of 1M domains counted its 333,000 matches again (95 ms,
issue 49) for the same answer, as a client walked the pages. One SQLite process is the only writer
of its database but for commands run beside it, so a kept total is good while neither this
connection has written a row (``total_changes``, triggers' rows included) nor another connection
has committed (``PRAGMA data_version``). Nothing is kept inside a transaction, whose writes may yet
roll back, nor on PostgreSQL, where other processes write.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

#: Totals kept at most; all are dropped when the database changes, or when one more would not fit.
KEPT_TOTALS = 64


class KeptTotals:
    def __init__(self, db: Any, *, postgres: bool) -> None:
        self.db = db
        self.postgres = postgres
        self._totals: dict[Hashable, int] = {}
        self._version: tuple[int, int] | None = None

    def _now(self) -> tuple[int, int] | None:
        if self.postgres:
            return None
        conn = self.db.conn
        if conn.in_transaction:
            return None
        return int(conn.total_changes), int(conn.execute("PRAGMA data_version").fetchone()[0])

    def get(self, key: Hashable, count: Callable[[], int]) -> int:
        """The total under ``key``, from ``count()`` unless kept since the database last changed."""
        version = self._now()
        if version is None:
            return count()
        if version != self._version:
            self._totals.clear()
            self._version = version
        total = self._totals.get(key)
        if total is None:
            total = count()
            if len(self._totals) >= KEPT_TOTALS:
                self._totals.clear()
            self._totals[key] = total
        return total
