"""The domain cache (store/row_cache.py): a domain read by id is kept, and dropped whenever any
process changes it. Two Stores on one PostgreSQL database stand for two service processes; the
one that keeps domains listens (``keep_domains``) as a serving process does."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import attrs
import psycopg
import pytest

from store import Store
from store.records import DomainRow, Workspace
from store.row_cache import RowCache
from tests.patience import PATIENCE_SECONDS
from tests.store.conftest import OpenStore

NOW = dt.datetime(2026, 11, 26, 12, tzinfo=dt.UTC)


def workspace() -> Workspace:
    return Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")


def domain(ws: Workspace, notes: str = "first") -> DomainRow:
    return DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=f"{uuid.uuid4().hex[:8]}.example.com", tags=[],
                     notes=notes, created_at=NOW, updated_at=NOW, delegation_target="t", validation_status="pending",
                     cert_status="none", ops_status="pending", ownership_token="t", checks_since=NOW)


def unit(store: Store, fn: Callable[[], object]) -> object:
    """``fn`` as a unit of work, from the test's thread, as a request would run it."""
    return asyncio.run(store.run(fn))


def eventually(check: Callable[[], bool], seconds: float = PATIENCE_SECONDS) -> float:
    """Seconds until ``check()`` held (the test fails if it never did)."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < seconds, "never happened"
        time.sleep(0.002)
    return time.monotonic() - start


@pytest.fixture
def pair(pg_database: str) -> Iterator[tuple[Store, Store]]:
    """A serving process that keeps domains, and another process, with one domain both see."""
    serving, other = Store(url=pg_database), Store(url=pg_database)
    serving.keep_domains()
    try:
        eventually(serving.domains.cache.live)
        yield serving, other
    finally:
        serving.close()
        other.close()


def seeded(store: Store) -> DomainRow:
    ws = workspace()
    row = domain(ws)

    def write() -> None:
        with store.transaction():
            store.accounts.insert_workspace(ws)
            store.domains.insert(row)

    unit(store, write)
    return row


def read(store: Store, row: DomainRow) -> DomainRow | None:
    return unit(store, lambda: store.domains.get(row.workspace_id, row.id))  # type: ignore[return-value]


def test_a_domain_read_by_id_is_kept(pair):
    serving, _ = pair
    row = seeded(serving)
    read(serving, row)
    assert serving.domains.cached(row.workspace_id, row.id) == row


def test_a_kept_domain_is_not_another_workspaces(pair):
    serving, _ = pair
    row = seeded(serving)
    read(serving, row)
    assert serving.domains.cached(uuid.uuid4(), row.id) is None


def test_a_domain_another_process_changed_is_dropped_on_its_notice(pair):
    serving, other = pair
    row = seeded(serving)
    read(serving, row)

    def change() -> None:
        with other.transaction():
            other.domains.update(attrs.evolve(row, notes="second"))

    unit(other, change)
    eventually(lambda: serving.domains.cached(row.workspace_id, row.id) is None)
    assert read(serving, row).notes == "second"  # type: ignore[union-attr]


def test_a_domain_another_process_deleted_is_dropped_on_its_notice(pair):
    serving, other = pair
    row = seeded(serving)
    read(serving, row)
    unit(other, lambda: other.domains.delete(row.workspace_id, row.id))
    eventually(lambda: serving.domains.cached(row.workspace_id, row.id) is None)
    assert read(serving, row) is None


def test_a_change_by_any_statement_is_told(pair):
    """The trigger tells, not the repository: SQL outside DomainRepo is covered too."""
    serving, other = pair
    row = seeded(serving)
    read(serving, row)
    unit(other, lambda: other.sql.execute("UPDATE domains SET notes = 'by hand' WHERE id = ?", [str(row.id)]))
    eventually(lambda: serving.domains.cached(row.workspace_id, row.id) is None)


def test_a_transaction_reads_past_the_cache(pair):
    """A row kept may be a notice behind another process's commit: what a transaction reads to
    write back must be the database's."""
    serving, _ = pair
    row = seeded(serving)
    stale = attrs.evolve(row, notes="stale")
    serving.domains.cache.fill(row.id, stale, serving.domains.cache.seen())

    def in_a_transaction() -> DomainRow | None:
        with serving.transaction():
            return serving.domains.get(row.workspace_id, row.id)

    assert unit(serving, in_a_transaction) == row


def test_a_row_another_thread_read_while_a_write_was_uncommitted_is_dropped_at_commit(pg_database):
    store = Store(url=pg_database)
    store.domains.cache.live = lambda: True  # kept, but deaf: the notice would come too late to tell
    try:
        row = seeded(store)

        def write_while_another_unit_reads() -> DomainRow | None:
            with store.transaction():
                store.domains.update(attrs.evolve(row, notes="second"))
                reader = threading.Thread(target=read, args=(store, row))
                reader.start()
                reader.join()
                assert store.domains.cache.get(row.id).notes == "first"  # type: ignore[union-attr]
            return store.domains.cache.get(row.id)

        assert unit(store, write_while_another_unit_reads) is None
    finally:
        store.close()


def connections_to(url: str) -> list[str]:
    """The application names of the connections to the database, other than the one asking."""
    with psycopg.connect(url, autocommit=True) as admin:
        return sorted(row[0] for row in admin.execute(
            "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"))


def test_a_listening_store_holds_its_pool_and_the_listener_and_nothing_more(pair, pg_database):
    """The connection that first checked the database became the listener's, and the pool opened
    with one more: each connection is a server process (issue 49)."""
    _, other = pair
    other.close()
    assert connections_to(pg_database) == ["", "cps-listener"]


def test_a_store_that_never_listened_leaves_no_connection_once_closed(pg_database):
    store = Store(url=pg_database)
    store.close()
    assert connections_to(pg_database) == []


def test_nothing_is_kept_by_a_store_that_does_not_listen(pg_database):
    store = Store(url=pg_database)
    try:
        row = seeded(store)
        read(store, row)
        assert store.domains.cached(row.workspace_id, row.id) is None
    finally:
        store.close()


def test_a_lost_listener_connection_drops_every_kept_domain(pair):
    """Notices sent while the listener reconnected are lost: nothing kept is served meanwhile,
    and everything kept is dropped once it listens again."""
    serving, other = pair
    row = seeded(serving)
    read(serving, row)
    with psycopg.connect(other.url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE datname = current_database() AND application_name = 'cps-listener'")
    eventually(lambda: not serving.domains.cache.live())
    eventually(serving.domains.cache.live)
    assert serving.domains.cached(row.workspace_id, row.id) is None


def test_a_rolled_back_transaction_leaves_nothing_of_its_own_kept(open_store: OpenStore):
    store = open_store()
    row = seeded(store)

    def rolled_back() -> None:
        with pytest.raises(RuntimeError), store.transaction():
            store.domains.update(attrs.evolve(row, notes="undone"))
            store.domains.get(row.workspace_id, row.id)
            raise RuntimeError

    unit(store, rolled_back)
    assert read(store, row).notes == "first"  # type: ignore[union-attr]


class TestRowCache:
    def test_a_row_read_before_a_drop_is_not_kept(self):
        cache: RowCache[str, str] = RowCache(10)
        seen = cache.seen()
        cache.forget(["other"])  # a write committed while the row was being read
        cache.fill("a", "old", seen)
        assert cache.get("a") is None

    def test_a_row_read_after_the_drop_is_kept(self):
        cache: RowCache[str, str] = RowCache(10)
        cache.forget(["a"])
        cache.fill("a", "new", cache.seen())
        assert cache.get("a") == "new"

    def test_nothing_is_served_or_kept_while_not_live(self):
        live = [True]
        cache: RowCache[str, str] = RowCache(10, live=lambda: live[0])
        cache.fill("a", "row", cache.seen())
        live[0] = False
        assert cache.get("a") is None
        cache.fill("b", "row", cache.seen())
        live[0] = True
        assert cache.get("b") is None

    def test_the_least_recently_kept_row_goes_first(self):
        cache: RowCache[str, str] = RowCache(2)
        for key in "abc":
            cache.fill(key, key, cache.seen())
        assert [cache.get(k) for k in "abc"] == [None, "b", "c"]
