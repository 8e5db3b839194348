"""Numbered schema migrations, applied in order at start-up and recorded.

A migration is never edited once released: a change to the schema is a new entry at the end,
so an existing database upgrades in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.clock import SystemClock
from core.wire import format_timestamp
from store.sqlite.schema import MIGRATIONS
from store.sqlite.schema_v1 import Migration

if TYPE_CHECKING:
    from store import Store


class SchemaTooNew(Exception):
    """The database was migrated by a newer version of the service: this code does not know its
    schema, and running on it would be undefined. Start-up stops (exit code 2)."""

    def __init__(self, database_version: int, code_version: int) -> None:
        self.database_version, self.code_version = database_version, code_version
        super().__init__(f"the database's schema is version {database_version}, newer than this code's "
                         f"{code_version}: run the newer version of the service, or restore the backup taken "
                         "before the upgrade")


def latest_version(migrations: list[Migration] | None = None) -> int:
    """The schema version this code writes."""
    return max(version for version, _, _ in (MIGRATIONS if migrations is None else migrations))


def schema_version(store: Store) -> int:
    """The newest migration the database records (0 before any)."""
    [version] = store.sql.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    return int(version)


def apply_migrations(store: Store, migrations: list[Migration] | None = None) -> list[int]:
    """Apply the migrations this database lacks; each one commits with its record. A database
    newer than the code is refused before anything is written (``SchemaTooNew``). On PostgreSQL
    processes starting together take turns (an advisory lock), so each migration runs once."""
    if store.pg is None:
        return _apply(store, MIGRATIONS if migrations is None else migrations)
    from store.postgres.schema import MIGRATIONS_PG

    with store.pg.connection():
        store.sql.execute("SELECT pg_advisory_lock(?)", [MIGRATION_LOCK])
        try:
            known = MIGRATIONS_PG if migrations is None else migrations
            applied = _apply(store, known)
            if applied and len(applied) < len(known):
                # An upgrade may add an index or rewrite a table: plans on it should not wait for
                # autovacuum's next look to have statistics. Not a new database: its empty tables
                # analysed would be planned as empty, with scans, until autovacuum looks again.
                store.sql.execute("ANALYZE")
            return applied
        finally:
            store.sql.execute("SELECT pg_advisory_unlock(?)", [MIGRATION_LOCK])


#: The advisory lock (any number of ours) that PostgreSQL migrations are applied under.
MIGRATION_LOCK = 0x63707301


def _apply(store: Store, migrations: list[Migration]) -> list[int]:
    db = store.sql
    db.execute(
        """CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            applied_at TEXT NOT NULL
        )"""
    )
    done = {row[0] for row in db.execute("SELECT version FROM schema_migrations").fetchall()}
    newest = latest_version(migrations)
    if done and max(done) > newest:
        raise SchemaTooNew(max(done), newest)
    applied = []
    for version, name, statements in migrations:
        if version in done:
            continue
        with store.transaction():
            for sql in statements:
                db.execute(sql)
            db.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                [version, name, format_timestamp(SystemClock().now())],
            )
        applied.append(version)
    return applied
