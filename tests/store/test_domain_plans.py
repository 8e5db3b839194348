"""The plans PostgreSQL runs a domain query with at scale (issue 49): found with EXPLAIN of the
statements the store sends, on a database grown through the store's own inserts and analysed."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from store import Store
from store.domains import DomainFilter
from store.postgres.pool import translate
from store.records import DomainRow, Workspace

NOW = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
DOMAINS = 5000


@pytest.fixture(scope="module")
def grown(pg_databases) -> Iterator[tuple[Store, Workspace]]:
    url = pg_databases.create()
    store = Store(url=url)
    ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
    store.accounts.insert_workspace(ws)
    for start in range(0, DOMAINS, 500):
        with store.transaction():
            store.domains.insert_new([
                DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=f"host{n}.customer{n % 97}.com",
                          tags=[["trial", "vip", "eu"][n % 3]], created_at=NOW, updated_at=NOW, delegation_target="t",
                          validation_status="pending", cert_status="none", ops_status="pending", ownership_token="t")
                for n in range(start, start + 500)])
    store.sql.execute("VACUUM ANALYZE")
    yield store, ws
    store.close()
    pg_databases.drop(url)


def plans(store: Store, ask: Any) -> list[dict[str, Any]]:
    """The plan of every statement ``ask(store)`` sends, as EXPLAIN (FORMAT JSON) gives it."""
    sent: list[tuple[str, Any]] = []
    execute = store.pg.execute  # type: ignore[union-attr]

    def spy(sql: str, parameters: Any = ()) -> Any:
        sent.append((sql, parameters))
        return execute(sql, parameters)

    store.pg.execute = spy  # type: ignore[union-attr,method-assign]
    try:
        ask(store)
    finally:
        del store.pg.execute  # type: ignore[union-attr]
    with store.pg.connection() as conn:  # type: ignore[union-attr]
        return [json.loads(json.dumps(conn.execute("EXPLAIN (FORMAT JSON) " + translate(sql), parameters).fetchone()[0]))[0]
                for sql, parameters in sent]


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def test_a_page_after_a_cursor_reads_the_workspace_once_not_once_a_row(grown):
    """After a cursor the planner takes the rest for a row or two; a join with the workspaces then
    probes their key once per row returned (8 ms of a page of 100 at 1M)."""
    store, ws = grown
    first = store.domains.page(ws.id, DomainFilter(), sort_by="createdAt", descending=True, after=None, limit=100)
    after = (first[-1]["created_at"], first[-1]["id"])
    [plan] = plans(store, lambda s: s.domains.page(ws.id, DomainFilter(), sort_by="createdAt", descending=True,
                                                    after=after, limit=100))
    types = [node["Node Type"] for node in nodes(plan["Plan"])]
    assert not {"Nested Loop", "Hash Join", "Merge Join"} & set(types), types
