"""The plans PostgreSQL runs a domain query with at scale (issue 49): found with EXPLAIN of the
statements the store sends, on a database grown through the store's own inserts and analysed."""

from __future__ import annotations

import datetime as dt
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


def plans(store: Store, ask: Any, *, analyse: bool = False) -> list[dict[str, Any]]:
    """The plan of every statement ``ask(store)`` sends, as EXPLAIN (FORMAT JSON) gives it; run
    again with ``analyse``, for the rows each node read."""
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
        explain = "EXPLAIN (ANALYZE, FORMAT JSON) " if analyse else "EXPLAIN (FORMAT JSON) "
        return [conn.execute(explain + translate(sql), parameters).fetchone()[0][0] for sql, parameters in sent]


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


def rows_read(plan: dict[str, Any], table: str) -> int:
    """Rows the plan's nodes on ``table`` read: those they returned and those they checked and dropped."""
    return sum(node.get("Actual Rows", 0) * node.get("Actual Loops", 1) + node.get("Rows Removed by Filter", 0)
               + node.get("Rows Removed by Index Recheck", 0)
               for node in nodes(plan["Plan"]) if node.get("Relation Name") == table)


def test_the_total_of_a_common_q_is_not_counted_row_by_row(grown):
    """A tag a third of the domains have: LIKE on each of them cost 273 ms at 1M; their distinct
    search texts (migration 28) are a few rows."""
    store, ws = grown
    f = DomainFilter(q="trial")
    assert store.domains.count(ws.id, f) == DOMAINS // 3 + 1
    [plan] = plans(store, lambda s: s.domains.count(ws.id, f), analyse=True)
    assert rows_read(plan, "domains") < DOMAINS // 10, plan


@pytest.mark.parametrize("q", ["host1234.customer70.com", "customer42."])
def test_the_hostname_index_is_asked_for_the_rarest_trigrams_of_q_only(grown, q):
    """Asked for every trigram of a hostname, the index reads every domain's entry of "hos" and
    "com": 0.3 s for one hostname at 1M. The whole of ``q`` is checked on the rows it finds."""
    store, ws = grown
    f = DomainFilter(q=q)
    assert store.domains.count(ws.id, f) == len(store.domains.page(
        ws.id, f, sort_by="createdAt", descending=True, after=None, limit=DOMAINS, sparse=True)) > 0
    asked = plans(store, lambda s: (s.domains.count(ws.id, f), s.domains.page(
        ws.id, f, sort_by="createdAt", descending=True, after=None, limit=100, sparse=True)))
    conditions = [node["Index Cond"] for plan in asked for node in nodes(plan["Plan"])
                  if node.get("Index Name") == "domains_apex_text"]
    assert conditions and all(q not in condition and condition.count("~~") <= 3 for condition in conditions), conditions


def test_forgetting_one_click_offers_reads_the_index_of_the_rows_that_have_one(grown):
    """PostgreSQL keeps no statistics of the offer's expression, so it planned a scan of every
    domain for the few with an offer: 0.22 s of each start-up with one-click set-up off at 1M."""
    store, _ = grown

    def index_reads() -> int:
        return int(store.sql.execute("SELECT idx_scan FROM pg_stat_user_indexes "
                                     "WHERE indexrelname = 'domains_one_click'").fetchone()[0])

    before = index_reads()
    with store.transaction():
        store.one_click.forget_offers()
        store.sql.execute("SELECT pg_stat_force_next_flush()")  # counted when this transaction ends
    assert index_reads() == before + 1


def test_forgetting_one_click_offers_leaves_the_connections_planner_as_it_was(grown):
    store, _ = grown
    with store.transaction():
        store.one_click.forget_offers()
        assert store.sql.execute("SHOW enable_seqscan").fetchone()[0] == "on"
