"""store: SQLite set-up, numbered migrations (on both backends, with the same numbers), transactions."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from store import Store
from store._rows import select
from store.migrations import apply_migrations
from store.postgres.schema import MIGRATIONS_PG
from store.sqlite.schema import MIGRATIONS
from tests.store.conftest import BACKENDS

#: What a statement the database refuses raises, on either backend.
REFUSED = (sqlite3.Error, psycopg.Error)


@pytest.fixture
def sqlite_store(tmp_path):
    s = Store(tmp_path / "db.sqlite3")
    yield s
    s.close()


@pytest.fixture(params=BACKENDS)
def new_store(request, tmp_path):
    """A Store on an empty database (not a migrated copy), so the store migrates it from nothing."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else ""
    s = Store(url=url) if url else Store(tmp_path / "db.sqlite3")
    yield s
    s.close()


def tables(store: Store) -> set[str]:
    if store.backend == "postgresql":
        sql = "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public'"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    return {r["name"] for r in select(store.sql, sql)}


def count_workspaces(store: Store) -> int:
    return int(store.sql.execute("SELECT count(*) FROM workspaces").fetchone()[0])


class TestSetUp:
    """Pragmas every SQLite connection runs with; what both databases enforce."""

    def test_wal_journal(self, sqlite_store):
        assert sqlite_store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    def test_foreign_keys_are_enforced(self, store):
        with pytest.raises(REFUSED):
            store.sql.execute(
                "INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES ('x', 'y', 'owner', 't')"
            )


class TestMigrations:
    """Numbered, recorded, applied once."""

    def test_both_backends_number_and_name_their_migrations_alike(self):
        assert [(v, name) for v, name, _ in MIGRATIONS_PG] == [(v, name) for v, name, _ in MIGRATIONS]

    def test_an_empty_database_gets_every_migration_recorded(self, new_store):
        store = new_store
        versions = [r["version"] for r in select(store.sql, "SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == [m[0] for m in MIGRATIONS]

    def test_reopening_applies_nothing_again(self, open_store):
        open_store().close()
        assert apply_migrations(open_store()) == []

    def test_an_existing_database_upgrades_in_place(self, store):
        store.sql.execute("INSERT INTO workspaces (id, name, created_at) VALUES ('w1', 'Kept', 't')")
        known = MIGRATIONS_PG if store.backend == "postgresql" else MIGRATIONS
        newest = max(version for version, _, _ in known)
        later = [*known, (newest + 1, "add a column", ["ALTER TABLE workspaces ADD COLUMN plan TEXT"])]
        assert apply_migrations(store, later) == [newest + 1]
        assert select(store.sql, "SELECT name, plan FROM workspaces") == [{"name": "Kept", "plan": None}]

    def test_a_failing_migration_leaves_no_trace(self, store):
        known = MIGRATIONS_PG if store.backend == "postgresql" else MIGRATIONS
        broken = [*known, (99, "broken", ["CREATE TABLE half (x INTEGER)", "THIS IS NOT SQL"])]
        with pytest.raises(REFUSED):
            apply_migrations(store, broken)
        assert "half" not in tables(store)
        assert 99 not in [r["version"] for r in select(store.sql, "SELECT version FROM schema_migrations")]


class TestTransactions:
    """store.transaction()."""

    def test_an_exception_rolls_everything_back(self, store):
        with pytest.raises(RuntimeError), store.transaction():
            store.sql.execute("INSERT INTO workspaces (id, name, created_at) VALUES ('w1', 'x', 't')")
            raise RuntimeError
        assert count_workspaces(store) == 0

    def test_nested_blocks_commit_with_the_outer_one(self, store):
        with pytest.raises(RuntimeError), store.transaction():
            with store.transaction():
                store.sql.execute("INSERT INTO workspaces (id, name, created_at) VALUES ('w1', 'x', 't')")
            raise RuntimeError
        assert count_workspaces(store) == 0

    def test_another_process_sees_a_transaction_only_once_it_commits(self, open_store):
        store, other = open_store(), open_store()
        with store.transaction():
            store.sql.execute("INSERT INTO workspaces (id, name, created_at) VALUES ('w1', 'x', 't')")
            assert count_workspaces(other) == 0
        assert count_workspaces(other) == 1


def test_sqlite_page_cache_is_bounded_at_16_mib(sqlite_store):
    """At 1M domains a 64 MiB page cache filled to most of the service's memory (190 MB RSS after a
    mixed run) for no measurable gain over 16 MiB, the pages past it read from the system's cache
    (issue 49). A negative cache_size is KiB."""
    assert sqlite_store.db.execute("PRAGMA cache_size").fetchone()[0] == -16 * 1024
