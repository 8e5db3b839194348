"""WAL checkpoints off the request path: once the service hands them to its background job,
commits leave the WAL alone up to the ceiling, and the background run copies it all back."""

from __future__ import annotations

import shutil
import sqlite3

from store import Store
from store.sqlite.checkpoints import CEILING_PAGES


def write_some(store: Store) -> None:
    with store.transaction():
        store.db.execute("CREATE TABLE IF NOT EXISTS filler (x)")
        store.db.execute("INSERT INTO filler SELECT randomblob(4000) FROM (SELECT 1 UNION SELECT 2 UNION SELECT 3)")


def test_commits_checkpoint_by_themselves_until_it_is_handed_over(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    assert store.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000


def test_once_handed_over_commits_checkpoint_only_past_the_ceiling(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    store.checkpoint_elsewhere()
    assert store.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == CEILING_PAGES


def rows_in_the_database_file_alone(tmp_path) -> int:
    """What the database file holds without its WAL (a copy of the file, opened on its own)."""
    alone = tmp_path / "alone.sqlite3"
    shutil.copy(tmp_path / "db.sqlite3", alone)
    try:
        return sqlite3.connect(alone).execute("SELECT count(*) FROM filler").fetchone()[0]
    except sqlite3.OperationalError:  # no such table: still only in the WAL
        return 0


def test_a_commit_no_longer_copies_the_wal_back(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    store.checkpoint_elsewhere()
    for _ in range(400):  # 1,200 pages and more: past where a commit checkpointed before
        write_some(store)
    assert rows_in_the_database_file_alone(tmp_path) == 0


def test_a_background_run_copies_the_wal_back(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    checkpointer = store.checkpoint_elsewhere()
    write_some(store)
    checkpointer.run()
    assert rows_in_the_database_file_alone(tmp_path) == 3


def test_an_in_memory_database_has_nothing_to_checkpoint():
    assert Store(":memory:").checkpoint_elsewhere() is None


def test_closing_the_store_closes_its_checkpointer(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    checkpointer = store.checkpoint_elsewhere()
    store.close()
    checkpointer.run()  # after close: does nothing, raises nothing
