"""The SQLite connection the repositories use (``store.db``, the ``db`` each repository is given).

sqlite-utils' ``Database`` wrapped it before, and the store used nothing of it but ``execute`` and
``conn``: importing sqlite-utils (with click, pluggy, dateutil and its recipes) was a tenth of the
service's start-up (issue 49), and its ``execute`` a Python call in front of every statement.
``execute`` here is the connection's own. The connection is in autocommit mode
(``isolation_level=None``): sqlite-utils' committing of implicitly begun transactions never had
anything to do; the one setting it made, ``recursive_triggers``, is made here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable


class Database:
    __slots__ = ("conn", "execute")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.execute: Callable[..., sqlite3.Cursor] = conn.execute
        "``execute(sql)`` or ``execute(sql, parameters)``: the connection's."
        conn.execute("PRAGMA recursive_triggers = ON")
