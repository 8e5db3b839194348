"""store.domains.count: every counting strategy agrees with counting the rows one by one, on both
backends (tests/store/conftest.py)."""

from __future__ import annotations

import datetime as dt
import itertools
import random
import uuid
from collections.abc import Callable

import attrs
import pytest

from core.domains.records import CERT_STATUSES, VALIDATION_STATUSES, ops_status
from store import Store
from store.domain_rows import from_columns, search_text
from store.domains import DomainFilter
from store.migrations import apply_migrations
from store.records import DomainRow, Workspace

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)


def workspace(store: Store) -> Workspace:
    ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
    store.accounts.insert_workspace(ws)
    return ws


def random_domain(rng: random.Random, ws: Workspace, n: int) -> DomainRow:
    validation, cert = rng.choice(VALIDATION_STATUSES), rng.choice(CERT_STATUSES)
    return DomainRow(
        id=uuid.uuid4(), workspace_id=ws.id, apex=f"h{n}.example.com", tags=rng.sample(["a", "b", "c"], rng.randint(0, 3)),
        created_at=NOW, updated_at=NOW, delegation_target="t", validation_status=validation, cert_status=cert,
        ops_status=ops_status(validation, cert), ownership_token="t",
    )


def brute_force(store: Store, ws: Workspace, f: DomainFilter) -> int:
    rows = map(from_columns, store.domains.page(ws.id, DomainFilter(), sort_by="createdAt", descending=True, after=None,
                                                  limit=10**6))
    return sum(
        1
        for r in rows
        if (f.ops_status is None or r.ops_status == f.ops_status)
        and (f.validation_status is None or r.validation_status == f.validation_status)
        and (f.cert_status is None or r.cert_status == f.cert_status)
        and all(t in r.tags for t in f.tags)
        and (f.q is None or f.q in r.apex or f.q in search_text(r.notes, r.tags))
    )


def test_counts_stay_exact_through_inserts_updates_and_deletes(store):
    rng = random.Random(7)
    ws, other = workspace(store), workspace(store)
    rows = [random_domain(rng, ws, n) for n in range(60)]
    for row in rows:
        store.domains.insert(row)
    store.domains.insert(random_domain(rng, other, 999))
    for row in rng.sample(rows, 25):  # status changes, some with new tags
        changed = random_domain(rng, ws, 0)
        store.domains.update(
            attrs.evolve(row, validation_status=changed.validation_status, cert_status=changed.cert_status,
                         ops_status=changed.ops_status, tags=changed.tags),
            tags_changed=True,
        )
    for row in rng.sample(rows, 25):  # status changes alone: the tag index follows by trigger
        row = store.domains.get(ws.id, row.id) or row
        changed = random_domain(rng, ws, 0)
        store.domains.update(attrs.evolve(row, validation_status=changed.validation_status, cert_status=changed.cert_status,
                                          ops_status=changed.ops_status))
    for row in rng.sample(rows, 10):
        store.domains.delete(ws.id, row.id)
    assert_counts_exact(store, ws)


def assert_counts_exact(store: Store, ws: Workspace) -> None:
    filters = [DomainFilter()]
    filters += [DomainFilter(cert_status=c) for c in CERT_STATUSES]
    filters += [DomainFilter(validation_status=v, cert_status=c) for v, c in itertools.product(VALIDATION_STATUSES, CERT_STATUSES)]
    filters += [DomainFilter(tags=(t,)) for t in "abc"]
    filters += [DomainFilter(tags=(t,), cert_status=c) for t, c in itertools.product("abc", CERT_STATUSES)]
    filters += [DomainFilter(tags=("b",), validation_status=v, ops_status="action_needed") for v in VALIDATION_STATUSES]
    filters += [DomainFilter(tags=("a", "b")), DomainFilter(tags=("a", "c"), ops_status="action_needed")]
    # ``q`` alone: on PostgreSQL counted from the distinct search texts and the hostnames (migration 28).
    filters += [DomainFilter(q=q) for q in ("a", "b\nc", "h1", "h12.example", "example.com", "zz")]
    filters += [DomainFilter(q="a", cert_status="active"), DomainFilter(q="h1", tags=("b",))]
    for f in filters:
        assert store.domains.count(ws.id, f) == brute_force(store, ws, f), f


def test_counts_stay_exact_when_many_domains_are_inserted_in_one_call(store):
    rng = random.Random(5)
    ws = workspace(store)
    rows = [random_domain(rng, ws, n) for n in range(130)]  # several statements' worth of rows and of tags
    store.domains.insert_many(rows)
    page = store.domains.page(ws.id, DomainFilter(), sort_by="apex", descending=False, after=None, limit=1000)
    stored = {r.id: r.tags for r in map(from_columns, page)}
    assert stored == {r.id: r.tags for r in rows}
    assert_counts_exact(store, ws)


def test_the_tag_counts_migration_counts_the_tags_already_stored(store):
    rng = random.Random(11)
    ws = workspace(store)
    for n in range(40):
        store.domains.insert(random_domain(rng, ws, n))
    with store.transaction():  # as a database of schema 6 was: no tag counts yet
        if store.backend == "postgresql":
            store.sql.execute("DROP FUNCTION cps_tag_counts() CASCADE")  # and its triggers
        else:
            for name in ("tag_counts_insert", "tag_counts_delete", "tag_counts_update"):
                store.sql.execute(f"DROP TRIGGER {name}")
        store.sql.execute("DROP TABLE tag_counts")
        store.sql.execute("DELETE FROM schema_migrations WHERE version = 7")
    assert apply_migrations(store) == [7]
    assert_counts_exact(store, ws)


def test_sparse_and_dense_pages_agree(store):
    rng = random.Random(3)
    ws = workspace(store)
    for n in range(40):
        store.domains.insert(random_domain(rng, ws, n))
    f = DomainFilter(tags=("a", "b"))
    kwargs = {"sort_by": "apex", "descending": False, "after": None, "limit": 100}
    dense = [r["id"] for r in store.domains.page(ws.id, f, sparse=False, **kwargs)]
    sparse = [r["id"] for r in store.domains.page(ws.id, f, sparse=True, **kwargs)]
    assert dense == sparse and len(dense) == brute_force(store, ws, f)


def test_serving_counts_the_verified_active_domains_issued_before_a_time_up_to_a_bound(store):
    ws, other = workspace(store), workspace(store)
    day = dt.timedelta(days=1)
    kinds = [("verified", "active", NOW - 2 * day)] * 3 + [
        ("verified", "active", NOW),  # issued too recently
        ("verified", "pending", NOW - 2 * day),  # not serving
        ("verified", "renewing", NOW - 2 * day),  # serving, so opsStatus active too
        ("error", "active", NOW - 2 * day),  # no longer verified
    ]
    for n, (validation, cert, issued) in enumerate(kinds):
        row = attrs.evolve(random_domain(random.Random(n), ws, n), validation_status=validation, cert_status=cert,
                           ops_status=ops_status(validation, cert), cert_last_issued_at=issued)
        store.domains.insert(row)
    store.domains.insert(attrs.evolve(random_domain(random.Random(0), other, 99), validation_status="verified",
                                      cert_status="active", ops_status="active", cert_last_issued_at=NOW - 2 * day))
    assert store.domains.serving(ws.id, issued_before=NOW - day, at_most=100) == 4
    assert store.domains.serving(ws.id, issued_before=NOW - day, at_most=2) == 2
    assert store.domains.serving(ws.id, issued_before=NOW + day, at_most=100) == 5


def statements_counting(store: Store, run: Callable[[], object]) -> list[str]:
    """The SQL statements ``run`` sent to SQLite that count rows."""
    sent: list[str] = []
    store.db.conn.set_trace_callback(sent.append)
    try:
        run()
    finally:
        store.db.conn.set_trace_callback(None)
    return [sql for sql in sent if "count(*)" in sql]


def test_a_text_total_is_counted_once_while_the_database_stays_the_same(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    try:
        rng = random.Random(9)
        ws = workspace(store)
        store.domains.insert_many([random_domain(rng, ws, n) for n in range(30)])
        f = DomainFilter(q="h1")
        first = store.domains.count(ws.id, f)
        assert statements_counting(store, lambda: store.domains.count(ws.id, f)) == []
        assert store.domains.count(ws.id, f) == first == 11  # h1, h10-h19
    finally:
        store.close()


def test_a_kept_total_follows_every_change_to_the_database(store):
    rng = random.Random(9)
    ws = workspace(store)
    store.domains.insert_many([random_domain(rng, ws, n) for n in range(30)])
    f, tags = DomainFilter(q="h1"), DomainFilter(tags=("a", "b"))
    assert store.domains.count(ws.id, f) == 11
    store.domains.insert(random_domain(rng, ws, 100))
    assert store.domains.count(ws.id, f) == 12
    tagged = brute_force(store, ws, tags)
    assert store.domains.count(ws.id, tags) == tagged
    row = next(r for r in map(from_columns, store.domains.page(ws.id, DomainFilter(), sort_by="apex", descending=False,
                                                              after=None, limit=100)) if "a" not in r.tags)
    store.domains.update(attrs.evolve(row, tags=["a", "b"]), tags_changed=True)
    assert store.domains.count(ws.id, tags) == tagged + 1
    other = open_other(store)  # another connection's commit, as a command run beside the service makes
    try:
        other.domains.insert(random_domain(rng, ws, 101))
    finally:
        other.close()
    assert store.domains.count(ws.id, f) == 13


def test_a_total_counted_in_a_transaction_that_rolls_back_is_not_kept(store):
    rng = random.Random(9)
    ws = workspace(store)
    store.domains.insert_many([random_domain(rng, ws, n) for n in range(30)])
    f = DomainFilter(q="h1")
    with pytest.raises(RuntimeError), store.transaction():
        store.domains.insert(random_domain(rng, ws, 100))
        assert store.domains.count(ws.id, f) == 12
        raise RuntimeError("rolled back")
    assert store.domains.count(ws.id, f) == 11


def open_other(store: Store) -> Store:
    return Store(url=store.url) if store.url else Store(store.path)
