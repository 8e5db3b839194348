"""store.domains: ``q`` finds what a plain scan of the folded text finds, on both backends (SQLite's
FTS5 trigram table, PostgreSQL's trigram indexes); the migration that fills in the folded search
text (8) on SQLite, where databases older than it exist."""

from __future__ import annotations

import datetime as dt
import random
import uuid

import pytest

from core.domains.query import _as_hostname
from store import Store
from store.domain_rows import fold, search_text
from store.domains import DomainFilter
from store.migrations import apply_migrations
from store.records import DomainRow, Workspace
from tests.store.conftest import BACKENDS

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
WORDS = ["shop", "école", "ÉCOLE", "straße", "STRASSE", "über", "vip", "eu-west", "100%", "a_b", "back\\slash", "日本語",
         "ﬁle", "café", "CAFÉ", "xn--bcher-kva", "bücher", "\"quoted\"", "o'neil", "ΣΊΣΥΦΟΣ"]


def domain(ws: Workspace, apex: str, *, notes: str | None = None, tags: list[str] | None = None) -> DomainRow:
    return DomainRow(
        id=uuid.uuid4(), workspace_id=ws.id, apex=apex, notes=notes, tags=tags or [], created_at=NOW, updated_at=NOW,
        delegation_target="t", validation_status="pending", cert_status="none", ops_status="pending", ownership_token="t",
    )


def random_domain(rng: random.Random, ws: Workspace, n: int) -> DomainRow:
    apex = f"{rng.choice(['shop', 'www', 'xn--bcher-kva', 'eu-west'])}{n}.{rng.choice(['example', 'cafe'])}.com"
    notes = " ".join(rng.sample(WORDS, rng.randint(0, 3))) or None
    return domain(ws, apex, notes=notes, tags=rng.sample(WORDS, rng.randint(0, 2)))


def workspace(store: Store, name: str = "w") -> Workspace:
    ws = Workspace(id=uuid.uuid4(), name=name, created_at=NOW, ownership_token=name)
    store.accounts.insert_workspace(ws)
    return ws


def q_filter(q: str) -> DomainFilter:
    """``q`` as the API passes it to the store (core/domains/query.py)."""
    return DomainFilter(q=fold(q), q_hostname=_as_hostname(q.lower()))


def found(store: Store, ws: Workspace, q: str, *, sparse: bool = True) -> set[uuid.UUID]:
    rows = store.domains.page(ws.id, q_filter(q), sort_by="createdAt", descending=False, after=None, limit=10_000,
                              sparse=sparse)
    return {uuid.UUID(row["id"]) for row in rows}


def scanned(rows: list[DomainRow], q: str) -> set[uuid.UUID]:
    """What ``q`` means, computed in Python: a substring of the apex (or of ``q``'s hostname form in
    it), of the folded notes, or of any one folded tag."""
    folded, hostname = fold(q), _as_hostname(q.lower())
    return {row.id for row in rows
            if folded in row.apex or (hostname and hostname in row.apex)
            or any(folded in text for text in search_text(row.notes, row.tags).split("\n"))}


@pytest.fixture(scope="module", params=BACKENDS)
def world(request, tmp_path_factory):
    """300 generated domains of one workspace and 100 of another, on each backend."""
    databases = request.getfixturevalue("pg_databases") if request.param == "postgresql" else None
    url = databases.create() if databases else ""
    store = Store(url=url) if url else Store(tmp_path_factory.mktemp("search") / "db.sqlite3")
    rng = random.Random(29)
    with store.transaction():
        ws, other = workspace(store), workspace(store, "o")
        rows = [random_domain(rng, ws, n) for n in range(300)]
        store.domains.insert_many(rows)
        store.domains.insert_many([random_domain(rng, other, n) for n in range(100)])
    yield store, ws, rows
    store.close()
    if databases:
        databases.drop(url)


def terms(rng: random.Random, rows: list[DomainRow], count: int) -> list[str]:
    """Substrings of stored text (apexes, notes, tags), in various cases, and strings that match nothing."""
    texts = [t for row in rows for t in (row.apex, row.notes or "", *row.tags) if t]
    chosen: list[str] = []
    while len(chosen) < count:
        if rng.random() < 0.7:
            text = rng.choice(texts)
            start = rng.randrange(len(text))
            term = text[start:start + rng.randint(1, 12)]
            chosen.append(term.upper() if rng.random() < 0.3 else term)
        else:
            chosen.append("".join(rng.choice("abcxyz%_\\ é.-") for _ in range(rng.randint(1, 8))))
        if not chosen[-1].strip() or not chosen[-1].isprintable():
            chosen.pop()
    return chosen


def test_q_finds_what_a_scan_finds(world):
    store, ws, rows = world
    for q in terms(random.Random(1), rows, 150):
        expected = scanned(rows, q)
        assert found(store, ws, q, sparse=True) == found(store, ws, q, sparse=False) == expected, q
        assert store.domains.count(ws.id, q_filter(q)) == len(expected), q


@pytest.mark.parametrize("q", ["école", "ÉCOLE", "strasse", "STRASSE", "straße", "über", "ÜBER", "ﬁle", "file",
                               "σίσυφος", "café", "CAFÉ"])
def test_unicode_case_folding_finds_notes_and_tags(world, q):
    store, ws, rows = world
    assert found(store, ws, q) == scanned(rows, q) != set()


@pytest.mark.parametrize("q", ["bücher", "BÜCHER", "xn--bcher-kva"])
def test_an_idn_is_found_by_its_u_label_and_its_a_label(world, q):
    store, ws, rows = world
    ids = found(store, ws, q)
    assert ids == scanned(rows, q)
    assert any(row.apex.startswith("xn--bcher-kva") for row in rows if row.id in ids)


@pytest.mark.parametrize("q", ["%", "_", "\\", "100%", "a_b", "k\\s", "0%", "a%b", "%_"])
def test_like_wildcards_in_q_are_taken_literally(world, q):
    store, ws, rows = world
    assert found(store, ws, q) == scanned(rows, q)
    assert store.domains.count(ws.id, q_filter(q)) == len(scanned(rows, q))


def test_another_workspaces_rows_are_never_found(world):
    store, ws, rows = world
    mine = {row.id for row in rows}
    other = store.domains.page(ws.id, DomainFilter(), sort_by="apex", descending=False, after=None, limit=1000)
    assert {uuid.UUID(row["id"]) for row in other} == mine
    for q in ("shop", "com", "école", "bücher"):
        assert found(store, ws, q) <= mine


def test_an_idns_a_label_in_a_note_is_not_a_match_of_its_u_label(store):
    ws = workspace(store)
    in_apex, in_note = domain(ws, "xn--bcher-kva.example"), domain(ws, "shop.example", notes="see xn--bcher-kva")
    store.domains.insert_many([in_apex, in_note])
    assert found(store, ws, "bücher") == {in_apex.id}
    assert store.domains.count(ws.id, q_filter("bücher")) == 1


@pytest.fixture
def sqlite_store(tmp_path):
    s = Store(tmp_path / "db.sqlite3")
    yield s
    s.close()


def test_the_migration_fills_in_the_search_text_of_domains_already_stored(sqlite_store):
    store = sqlite_store
    ws = workspace(store)
    store.domains.insert(domain(ws, "a.example.com", notes="ÉCOLE"))
    store.domains.insert(domain(ws, "b.example.com", tags=["Über"]))
    with store.transaction():  # as a database of schema 7 was: no search text yet (nor its index, 11)
        for trigger in ("insert", "delete", "update", "workspace_delete"):
            store.db.execute(f"DROP TRIGGER domain_text_{trigger}")
        store.db.execute("DROP TABLE domain_text")
        store.db.execute("ALTER TABLE domains DROP COLUMN search_text")
        store.db.execute("DELETE FROM schema_migrations WHERE version IN (8, 11)")
    assert apply_migrations(store) == [8, 11]
    store.domains.cache.forget_all()
    assert store.domains.count(ws.id, DomainFilter(q=fold("école"))) == 1
    assert store.domains.count(ws.id, DomainFilter(q=fold("ÜBER"))) == 1
