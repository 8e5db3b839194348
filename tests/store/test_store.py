"""store: SQLite set-up, numbered migrations, transactions."""

from __future__ import annotations

import sqlite3

import pytest

from store import Store
from store.migrations import MIGRATIONS, apply_migrations


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "db.sqlite3")
    yield s
    s.close()


class TestSetUp:
    """Pragmas every connection runs with."""

    def test_wal_journal(self, store):
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    def test_foreign_keys_are_enforced(self, store):
        with pytest.raises(sqlite3.IntegrityError):
            store.db.execute(
                "INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES ('x', 'y', 'owner', 't')"
            )


class TestMigrations:
    """Numbered, recorded, applied once."""

    def test_every_migration_is_recorded(self, store):
        versions = [r["version"] for r in store.db.query("SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == [m[0] for m in MIGRATIONS]

    def test_reopening_applies_nothing_again(self, tmp_path):
        Store(tmp_path / "db.sqlite3").close()
        again = Store(tmp_path / "db.sqlite3")
        assert apply_migrations(again) == []
        again.close()

    def test_an_existing_database_upgrades_in_place(self, store):
        store.db.execute("INSERT INTO workspaces (id, name, created_at) VALUES ('w1', 'Kept', 't')")
        later = [*MIGRATIONS, (len(MIGRATIONS) + 1, "add a column", ["ALTER TABLE workspaces ADD COLUMN plan TEXT"])]
        assert apply_migrations(store, later) == [len(MIGRATIONS) + 1]
        row = next(store.db.query("SELECT name, plan FROM workspaces"))
        assert row == {"name": "Kept", "plan": None}

    def test_a_failing_migration_leaves_no_trace(self, store):
        broken = [*MIGRATIONS, (99, "broken", ["CREATE TABLE half (x)", "THIS IS NOT SQL"])]
        with pytest.raises(sqlite3.OperationalError):
            apply_migrations(store, broken)
        assert "half" not in store.db.table_names()
        assert 99 not in [r["version"] for r in store.db.query("SELECT version FROM schema_migrations")]


class TestTransactions:
    """store.transaction()."""

    def test_an_exception_rolls_everything_back(self, store):
        with pytest.raises(RuntimeError), store.transaction():
            store.db.execute("INSERT INTO workspaces (id, name, created_at) VALUES ('w1', 'x', 't')")
            raise RuntimeError
        assert store.db.execute("SELECT count(*) FROM workspaces").fetchone()[0] == 0

    def test_nested_blocks_commit_with_the_outer_one(self, store):
        with pytest.raises(RuntimeError), store.transaction():
            with store.transaction():
                store.db.execute("INSERT INTO workspaces (id, name, created_at) VALUES ('w1', 'x', 't')")
            raise RuntimeError
        assert store.db.execute("SELECT count(*) FROM workspaces").fetchone()[0] == 0
