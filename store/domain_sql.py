"""SQL pieces of the domain repository (store/domains.py): many rows in one insert, and ``q``'s LIKE
patterns, spelled for each backend."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import orjson

from store._rows import postgres
from store.postgres.text_index import rarest

if TYPE_CHECKING:
    from store.sqlite.connection import Database

#: Parameters in one statement at most: SQLite's default limit since 3.32 (``parameters_allowed``
#: reads the build's own). Each statement sets up the table's triggers (the text index, the counts)
#: anew: a bulk create of 500 took a seventh more CPU in 17 statements of 990 parameters than in the
#: 6 of ``statement_sizes``, and a third more than in one.
MAX_PARAMETERS = 32766


def statement_sizes(count: int, most: int) -> list[int]:
    """Rows per statement for ``count`` rows: ``most`` each, the rest in powers of two. The
    connection keeps its last 128 statements prepared, and a statement of 500 rows takes 1.6 MB
    there; bulk creates of every size from 1 to 500 would each leave one (measured: 202 MB more
    held after 128 different sizes, against 23 MB with these). Powers of two leave at most a dozen
    a table, at a few more statements a bulk create."""
    most = max(1, most)
    sizes = [most] * (count // most)
    rest = count % most
    while rest:
        sizes.append(1 << (rest.bit_length() - 1))
        rest -= sizes[-1]
    return sizes


def parameters_allowed(db: Database) -> int:
    return min(MAX_PARAMETERS, db.conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))


def insert_rows(db: Database, table: str, columns: list[str], rows: list[Any], tail: str = "") -> list[Any]:
    """``rows`` (sequences in ``columns`` order) inserted with few statements (``statement_sizes``);
    ``tail`` ends each statement (``ON CONFLICT``, ``RETURNING``): what they return.

    On PostgreSQL one statement takes them all as one JSON parameter, typed by the table's own row
    type: psycopg parses a statement of more than 50 parameters anew on every call, and a bulk
    create of 500 spent 45 % of its time there (22 ms a statement), over 20 round trips (issue 49).
    The JSON is orjson's, in a quarter of ``json.dumps``' time for 500 domains (the wire's text holds
    no lone surrogate, which orjson refuses: core/text.py)."""
    if postgres(db):
        if not rows:
            return []
        names = ", ".join(columns)
        cursor = db.execute(
            f"INSERT INTO {table} ({names}) SELECT {names} FROM json_populate_recordset(NULL::{table}, ?){tail}",
            [orjson.dumps([dict(zip(columns, row)) for row in rows]).decode()],
        )
        return cursor.fetchall() if tail else []
    one = f"({', '.join('?' for _ in columns)})"
    returned: list[Any] = []
    start = 0
    for size in statement_sizes(len(rows), parameters_allowed(db) // len(columns)):
        chunk, start = rows[start : start + size], start + size
        cursor = db.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([one] * len(chunk))}{tail}",
            [value for row in chunk for value in row],
        )
        if tail:
            returned += cursor.fetchall()
    return returned


def like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def apex_like(apex: str, pg: bool) -> tuple[str, list[str]]:
    """The apex contains ``apex``. On PostgreSQL the trigram index is asked for its rarest
    trigrams only, and the whole pattern checked on the rows found (``|| ''`` keeps it out of the
    index): asked for all of them, the index reads every row's entry of the common ones ("com",
    "hos"), 0.3 s for one hostname at 1M (issue 49)."""
    if not pg or len(apex) < 3:
        return "d.apex LIKE ? ESCAPE '\\'", [like(apex)]
    grams = rarest(apex)
    return ("(" + "".join("d.apex LIKE ? ESCAPE '\\' AND " for _ in grams) + "(d.apex || '') LIKE ? ESCAPE '\\')",
            [*(like(g) for g in grams), like(apex)])
