"""The SQLite connection the repositories use (``store.db``, the ``db`` each repository is given):
the connection ``Store`` opens and configures, read and written through ``execute`` and ``conn``
only, with transactions begun and ended by ``Store``.

It was sqlite-utils' ``Database``, of which the store used those two and nothing else; importing
sqlite-utils (its plugin hooks, click, dateutil, and one regular expression that alone takes
0.03 s to compile) was 0.06 s of every start-up, before the first answer (issue 49). The same two
names, spelled the same way, keep the repositories as they were; sqlite-utils reads a database's
tables where the service reads them without the store (store/inspection.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any


class Database:
    """``conn`` and an ``execute`` that takes its parameters as sqlite-utils' does."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] | None = None) -> sqlite3.Cursor:
        if parameters is None:
            return self.conn.execute(sql)
        return self.conn.execute(sql, parameters)

    def close(self) -> None:
        self.conn.close()


__all__ = ["Database"]
