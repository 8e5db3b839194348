"""A bulk create's rows reach PostgreSQL in few statements that psycopg keeps parsed (issue 49)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from psycopg._queries import MAX_CACHED_STATEMENT_PARAMS

from store import Store
from store.records import DomainRow, Workspace

NOW = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)


def domains(ws: Workspace, count: int, prefix: str = "host") -> list[DomainRow]:
    return [DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=f"{prefix}{n}.example.com", tags=["a", "b"],
                      created_at=NOW, updated_at=NOW, delegation_target="t", validation_status="pending",
                      cert_status="none", ops_status="pending", ownership_token="t", check_step=n % 3)
            for n in range(count)]


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
