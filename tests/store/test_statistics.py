"""Planner statistics stay fresh without an operator (issue 41): SQLite never gathers them by itself,
so the store does (store.Store.optimize), and a text query does not need them; PostgreSQL's
migrations and the copy into it leave its tables analysed, and so do bulk creates that grow them
(issue 49)."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid

import pytest

from core.config import Config, LifecycleConfig, OidcConfig, StorageConfig
from core.domains.operations import BULK_MAX, BulkCreate, bulk_create
from core.runtime.assembly import build_services
from core.runtime.jobs import start_jobs
from store import GROWTH_FLOOR, Store
from store.domains import DomainFilter
from store.migrations import apply_migrations, latest_version
from store.postgres.copy import copy, snapshot
from store.postgres.schema import MIGRATIONS_PG
from store.records import DomainRow, Workspace
from tests.servers.oidc import CLIENT_ID

NOW = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)


def with_domains(store: Store, count: int) -> Workspace:
    ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
    with store.transaction():
        store.accounts.insert_workspace(ws)
        add_domains(store, ws, count)
    return ws


def add_domains(store: Store, ws: Workspace, count: int, start: int = 0) -> None:
    store.domains.insert_many([
        DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=f"host{n}.customer{n % 97}.com", tags=[], created_at=NOW,
                  updated_at=NOW, delegation_target="t", validation_status="pending", cert_status="none",
                  ops_status="pending", ownership_token="t")
        for n in range(start, start + count)
    ])


def analysed(store: Store) -> set[str]:
    if not store.db.execute("SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_stat1'").fetchone():
        return set()
    return {row[0] for row in store.db.execute("SELECT DISTINCT tbl FROM sqlite_stat1")}


def never_analysed(path) -> Store:
    """A SQLite database with domains and no statistics at all, as one grown by use is, opened again."""
    store = Store(path)
    with_domains(store, 50)
    store.db.execute("DROP TABLE IF EXISTS sqlite_stat1")
    store.close()
    return Store(path)


@pytest.mark.gen_test
async def test_sqlite_statistics_are_gathered_once_the_service_runs_on_a_database_never_analysed(tmp_path, oidc_issuer):
    never_analysed(tmp_path / "db.sqlite3").close()
    config = Config(storage=StorageConfig(path=str(tmp_path / "db.sqlite3"), secret_key_file=str(tmp_path / "secret.key")),
                    oidc=OidcConfig(issuer=oidc_issuer.issuer, client_id=CLIENT_ID),
                    lifecycle=LifecycleConfig(enabled=False))
    services = build_services(config)
    jobs, _ = start_jobs(services)
    try:
        for _ in range(100):  # the first look is made once the loop runs, not before the service listens
            if analysed(services.store):
                break
            await asyncio.sleep(0.01)
        assert {"domains", "domain_counts", "workspaces"} <= analysed(services.store)
    finally:
        for job in jobs.values():
            job.stop()
        services.close()


def test_sqlite_statistics_are_gathered_again_after_an_import_doubles_the_domains(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    try:
        ws = with_domains(store, GROWTH_FLOOR)
        store.optimize(opening=True)
        before = store.db.execute("SELECT stat FROM sqlite_stat1 WHERE idx = 'domains_created'").fetchone()[0]
        add_domains(store, ws, GROWTH_FLOOR, start=GROWTH_FLOOR)
        store.optimize_if_grown()
        after = store.db.execute("SELECT stat FROM sqlite_stat1 WHERE idx = 'domains_created'").fetchone()[0]
        assert int(before.split()[0]) == GROWTH_FLOOR and int(after.split()[0]) == 2 * GROWTH_FLOOR
    finally:
        store.close()


def test_a_text_query_is_answered_from_the_text_index_without_statistics(tmp_path):
    """Without statistics SQLite takes a workspace's rows for a handful and walks them in sort
    order; the matches of a rare word must come from the text index instead."""
    store = never_analysed(tmp_path / "db.sqlite3")
    plans: list[str] = []
    sent: list[str] = []
    try:
        ws_id = uuid.UUID(store.db.execute("SELECT id FROM workspaces").fetchone()[0])
        store.db.conn.set_trace_callback(sent.append)
        f = DomainFilter(q="customer42.")
        store.domains.count(ws_id, f)
        store.domains.page(ws_id, f, sort_by="createdAt", descending=True, after=None, limit=10, sparse=True)
        store.db.conn.set_trace_callback(None)
        for sql in sent:
            if sql.startswith("SELECT") and "d.rowid IN" in sql:
                plans += [row[3] for row in store.db.execute(f"EXPLAIN QUERY PLAN {sql}")]
        assert len([p for p in plans if "INTEGER PRIMARY KEY (rowid=?)" in p]) == 2, plans
        assert not [p for p in plans if "workspace_id=?" in p], plans
    finally:
        store.close()


def test_postgresql_tables_are_analysed_once_an_upgrade_migrated_them(postgres_url):
    store = Store(url=postgres_url)
    try:
        with_domains(store, 30)
        newest = latest_version(MIGRATIONS_PG)
        assert apply_migrations(store, [*MIGRATIONS_PG, (newest + 1, "an index", ["CREATE INDEX later ON domains(notes)"])])
        [(tuples,)] = store.sql.execute("SELECT reltuples FROM pg_class WHERE oid = 'domains'::regclass").fetchall()
        assert tuples == 30  # -1 until the table is first analysed
    finally:
        store.close()


def test_a_copy_into_postgresql_leaves_its_rows_analysed_and_vacuumed(tmp_path, postgres_url):
    source = Store(tmp_path / "db.sqlite3")
    with_domains(source, 30)
    copy(snapshot(source.db.conn, str(tmp_path)), postgres_url)
    source.close()
    target = Store(url=postgres_url)
    try:
        [(tuples, visible)] = target.sql.execute(
            "SELECT reltuples, relallvisible FROM pg_class WHERE oid = 'domains'::regclass").fetchall()
        assert tuples == 30 and visible > 0
    finally:
        target.close()



def stat_rows(store: Store, table: str) -> int:
    """The rows SQLite's statistics say ``table`` holds (0 when it has none)."""
    rows = store.db.execute("SELECT stat FROM sqlite_stat1 WHERE tbl = ?", [table]).fetchall()
    return max((int(stat.split()[0]) for (stat,) in rows), default=0)


@pytest.mark.gen_test
async def test_the_text_index_statistics_follow_domains_added_through_the_bulk_endpoint(services):
    """The text index's shadow tables are written by a trigger of every insert: statistics left
    from when they were nearly empty make the planner take them for a few rows, and each bulk
    write then slows with the table's size (issue 49: 1 s for 500 at 1M)."""
    ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
    with services.store.transaction():
        services.store.accounts.insert_workspace(ws)
    for batch in range(8):
        result = await bulk_create(services, workspace=ws, request=BulkCreate(
            apex_list=[f"host{n}.customer{batch}.com" for n in range(BULK_MAX)]))
        assert len(result.created) == BULK_MAX
    store = services.store
    for table in ("domain_text_data", "domain_text_idx", "domain_text_content"):
        held = int(store.db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
        assert stat_rows(store, table) >= held / 2, (table, stat_rows(store, table), held)


def test_postgresql_statistics_follow_domains_added_through_the_bulk_endpoint(postgres_url, oidc_issuer, tmp_path):
    """Autovacuum may be off or behind: a table grown through bulk creates is analysed by the
    service itself, or the planner keeps taking it for the few rows it held (issue 49)."""
    config = Config(storage=StorageConfig(path=str(tmp_path / "unused.sqlite3"), url=postgres_url,
                                          secret_key_file=str(tmp_path / "secret.key")),
                    oidc=OidcConfig(issuer=oidc_issuer.issuer, client_id=CLIENT_ID),
                    lifecycle=LifecycleConfig(enabled=False))
    services = build_services(config)
    try:
        store = services.store
        for table in ("domains", "domain_tags"):  # only the service's own analysis counts here
            store.sql.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
        store.accounts.insert_workspace(ws)
        for batch in range(3):
            result = asyncio.run(bulk_create(services, workspace=ws, request=BulkCreate(
                apex_list=[f"host{n}.customer{batch}.com" for n in range(BULK_MAX)], tags=["imported"])))
            assert len(result.created) == BULK_MAX
        for table in ("domains", "domain_tags"):
            believed = store.sql.execute(f"SELECT reltuples FROM pg_class WHERE oid = '{table}'::regclass").fetchone()[0]
            held = store.sql.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            assert believed >= held / 2, (table, believed, held)
    finally:
        services.close()
