"""A bulk create's rows reach the database in few statements (issue 49): on PostgreSQL statements
psycopg keeps parsed, on SQLite as many rows to a statement as the build allows parameters, since each
statement sets up the tables' triggers anew."""

from __future__ import annotations

import datetime as dt
import sqlite3
import uuid
from typing import Any

from psycopg._queries import MAX_CACHED_STATEMENT_PARAMS

from store import Store
from store.domain_rows import to_columns
from store.domain_sql import MAX_PARAMETERS, statement_sizes
from store.records import DomainRow, Workspace

NOW = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)


def domains(ws: Workspace, count: int, prefix: str = "host") -> list[DomainRow]:
    return [DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=f"{prefix}{n}.example.com", tags=["a", "b"],
                      created_at=NOW, updated_at=NOW, delegation_target="t", validation_status="pending",
                      cert_status="none", ops_status="pending", ownership_token="t", check_step=n % 3)
            for n in range(count)]


def inserted_on_sqlite(tmp_path, *, parameters_allowed: int | None = None) -> tuple[list[str], tuple[int, int, int]]:
    """500 new domains (two tags each) through ``insert_new`` on SQLite: the inserts into the two
    tables as sent, and the rows, their check steps' sum and the tags found afterwards."""
    store = Store(str(tmp_path / "service.sqlite3"))
    sent: list[str] = []
    try:
        ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
        store.accounts.insert_workspace(ws)
        if parameters_allowed is not None:
            store.db.conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, parameters_allowed)
        execute = store.db.execute

        def spy(sql: str, parameters: Any = None) -> Any:
            sent.append(sql)
            return execute(sql, parameters)

        store.db.execute = spy  # type: ignore[method-assign]
        with store.transaction():
            assert len(store.domains.insert_new(domains(ws, 500))) == 500
        del store.db.execute
        rows = store.db.execute("SELECT count(*), sum(check_step) FROM domains").fetchone()
        tags = store.db.execute("SELECT count(*) FROM domain_tags").fetchone()[0]
        return [sql for sql in sent if sql.startswith("INSERT INTO")], (rows[0], rows[1], tags)
    finally:
        store.close()


def test_a_bulk_insert_of_500_on_sqlite_is_a_few_statements_a_table(tmp_path):
    inserts, found = inserted_on_sqlite(tmp_path)
    tables = [sql.split(" (")[0] for sql in inserts]
    assert tables.count("INSERT INTO domains") <= 6 and tables.count("INSERT INTO domain_tags") <= 6
    assert found == (500, sum(n % 3 for n in range(500)), 1000)


def test_a_sqlite_build_that_allows_fewer_parameters_gets_the_rows_in_more_statements(tmp_path):
    inserts, found = inserted_on_sqlite(tmp_path, parameters_allowed=999)
    assert len(inserts) > 12
    assert all(sql.count("?") <= 999 for sql in inserts)
    assert found == (500, sum(n % 3 for n in range(500)), 1000)


def test_inserts_of_every_size_up_to_500_are_a_dozen_statements_a_table_to_keep_prepared():
    """The connection keeps its last 128 statements prepared, up to 1.6 MB each."""
    ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
    most = MAX_PARAMETERS // len(to_columns(domains(ws, 1)[0]))
    sizes = {size for count in range(1, 501) for size in statement_sizes(count, most)}
    assert len(sizes) <= 12
    assert all(sum(statement_sizes(count, most)) == count for count in range(1, 501))


def test_a_bulk_insert_of_500_on_postgresql_is_a_few_statements_each_kept_parsed(pg_database):
    """psycopg parses a statement of more than ``MAX_CACHED_STATEMENT_PARAMS`` parameters anew on
    every call (22 ms for one of 990): 500 rows in 20 such statements were half a bulk create."""
    store = Store(url=pg_database)
    sent: list[tuple[str, Any]] = []
    try:
        ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
        store.accounts.insert_workspace(ws)
        execute = store.pg.execute  # type: ignore[union-attr]

        def spy(sql: str, parameters: Any = ()) -> Any:
            sent.append((sql, parameters))
            return execute(sql, parameters)

        store.pg.execute = spy  # type: ignore[union-attr,method-assign]
        with store.transaction():
            store.domains.insert_new(domains(ws, 250, "known"))
        sent.clear()
        with store.transaction():
            inserted = store.domains.insert_new(domains(ws, 250, "known") + domains(ws, 250))
        assert len(inserted) == 250
        assert len(sent) <= 2 and all(len(parameters) <= MAX_CACHED_STATEMENT_PARAMS for _, parameters in sent)
        rows = store.sql.execute("SELECT count(*), sum(check_step) FROM domains").fetchone()
        tags = store.sql.execute("SELECT count(*) FROM domain_tags").fetchone()[0]
        assert (rows[0], rows[1], tags) == (500, 2 * sum(n % 3 for n in range(250)), 1000)
    finally:
        store.close()
