"""Moving up: a SQLite database's rows copied into an empty PostgreSQL database.

The rows come from a snapshot (SQLite's backup API), so the service may keep running while it is
taken; writes after the snapshot are not copied, which is why docs/operating/postgresql.md says to stop the service
first for the final copy. Everything is copied in one PostgreSQL transaction: a copy that fails
leaves the database as empty as it was. The counters the triggers keep (domain_counts,
tag_counts) are rebuilt by the triggers as the rows arrive and then compared with the source's;
SQLite's text index has no PostgreSQL table (trigram indexes read the rows themselves).
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import psycopg

#: Tables in an order that satisfies their foreign keys.
TABLES = (
    "workspaces", "users", "memberships", "api_keys", "invitations", "clients", "domains", "domain_tags",
    "certificates", "outbox_events", "idempotency_keys", "webhook_endpoints", "webhook_deliveries",
    "webhook_attempts", "verification_links", "reminder_sends", "one_click_starts", "acme_accounts",
    "acme_certificates", "acme_challenges", "acme_validations", "simulated_dns_records",
)
#: Kept by triggers from the rows above; compared, not copied.
DERIVED = ("domain_counts", "tag_counts")
#: Tables whose SQLite rowid is read by queries (an identity column of that name on PostgreSQL).
WITH_ROWID = ("memberships", "verification_links", "reminder_sends")


class CopyRefused(Exception):
    """The copy was not made; the message says why, in one line."""


def snapshot(conn: sqlite3.Connection, folder: str) -> Path:
    """A consistent copy of a live SQLite database in ``folder``, through the backup API."""
    path = Path(folder) / "snapshot.sqlite3"
    copy = sqlite3.connect(path)
    try:
        conn.backup(copy)
    finally:
        copy.close()
    return path


def rows_in(pg: psycopg.Connection[Any]) -> dict[str, int]:
    """Rows in each of our tables that exist in the PostgreSQL database."""
    existing = {r[0] for r in pg.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
    return {t: int(pg.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
            for t in (*TABLES, *DERIVED) if t in existing}


def copy(source: Path, url: str) -> dict[str, int]:
    """Copy every row of the SQLite database at ``source`` into the database at ``url``, both
    migrated to this code's schema first; the rows copied per table. Refuses a database with rows."""
    from store import Store

    Store(source).close()
    Store(url=url).close()
    lite = sqlite3.connect(source)
    try:
        with psycopg.connect(url, autocommit=False) as pg:
            busy = {t: n for t, n in rows_in(pg).items() if n}
            if busy:
                raise CopyRefused(f"the PostgreSQL database is not empty ({', '.join(f'{t}: {n} rows' for t, n in busy.items())})")
            copied = {table: _copy_table(lite, pg, table) for table in TABLES}
            for table in WITH_ROWID:
                pg.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'rowid'), "
                           f"greatest((SELECT max(rowid) FROM {table}), 1))")
            _check(lite, pg, copied)
            pg.commit()
            # As autovacuum would leave the rows, a minute or more later: planner statistics, the
            # visibility map, and the trigram indexes' pending entries merged. Until then plans
            # guess, and a guess that scans the pending entries costs every write that waits on it.
            pg.autocommit = True
            pg.execute("VACUUM ANALYZE")
    finally:
        lite.close()
    return copied


def _copy_table(lite: sqlite3.Connection, pg: psycopg.Connection[Any], table: str) -> int:
    ours = [r[1] for r in lite.execute(f"PRAGMA table_info({table})")]
    theirs = {r[0] for r in pg.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = %s", [table]
    )}
    columns = [c for c in ours if c in theirs]
    read = ["rowid", *columns] if table in WITH_ROWID else columns
    count = 0
    with pg.cursor().copy(f"COPY {table} ({', '.join(read)}) FROM STDIN") as out:
        for row in lite.execute(f"SELECT {', '.join(read)} FROM {table}"):
            out.write_row(row)
            count += 1
    return count


def _check(lite: sqlite3.Connection, pg: psycopg.Connection[Any], copied: dict[str, int]) -> None:
    """Every table's count on both sides, and the counters the triggers rebuilt."""
    landed = rows_in(pg)
    for table in TABLES:
        [source] = lite.execute(f"SELECT count(*) FROM {table}").fetchone()
        if not source == copied[table] == landed[table]:
            raise CopyRefused(f"{table}: {source} rows in SQLite, {landed[table]} in PostgreSQL; nothing was copied")
    for table in DERIVED:
        keys = "workspace_id, tag, ops_status, validation_status, cert_status" if table == "tag_counts" else \
            "workspace_id, ops_status, validation_status, cert_status"
        sql = f"SELECT {keys}, sum(n) FROM {table} GROUP BY {keys} HAVING sum(n) > 0 ORDER BY {keys}"
        if [tuple(r) for r in lite.execute(sql)] != [tuple(r) for r in pg.execute(sql)]:
            raise CopyRefused(f"{table} differs after the copy; nothing was copied")


def temporary_folder() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="cps-copy-")
