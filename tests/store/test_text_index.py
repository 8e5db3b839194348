"""``q`` from the trigram index (migration 11) finds exactly what a plain scan finds: the same ids
for 2,000 random terms over generated domains, in both of the page's strategies and in the count;
an existing database gets its index; Unicode-folded notes and tags are found through it."""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid

import attrs
import pytest

from core.domains.query import _as_hostname
from core.domains.records import ops_status
from store import Store
from store import domains as domains_module
from store.domain_rows import fold, from_columns, search_text
from store.domains import DomainFilter
from store.migrations import apply_migrations
from store.postgres.text_index import phrase as text_match
from store.records import DomainRow, Workspace

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
WORDS = ["shop", "école", "ÉCOLE", "straße", "STRASSE", "über", "vip", "eu-west", "100%", "a_b", "日本語", "ﬁle",
         "Ǆemal", "café", "CAFÉ", "x", "xn--bcher-kva", "bücher", "\"quoted\"", "o'neil", "naïve", "ΣΊΣΥΦΟΣ"]


def random_domain(rng: random.Random, ws: Workspace, n: int) -> DomainRow:
    apex = f"{rng.choice(['shop', 'www', 'api', 'xn--bcher-kva', 'eu-west'])}{n}.{rng.choice(['example', 'cafe', 'test-site'])}.com"
    notes = " ".join(rng.sample(WORDS, rng.randint(0, 3))) or None
    tags = rng.sample(WORDS, rng.randint(0, 2))
    return DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=apex, tags=tags, notes=notes, created_at=NOW,
                     updated_at=NOW + dt.timedelta(seconds=n), delegation_target="t", validation_status="pending",
                     cert_status="none", ops_status=ops_status("pending", "none"), ownership_token="t")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("text") / "db.sqlite3")
    rng = random.Random(26)
    ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
    other = Workspace(id=uuid.uuid4(), name="o", created_at=NOW, ownership_token="o")
    with store.transaction():
        store.accounts.insert_workspace(ws)
        store.accounts.insert_workspace(other)
        store.domains.insert_many([random_domain(rng, ws, n) for n in range(2500)])
        store.domains.insert_many([random_domain(rng, other, n) for n in range(500)])
        # Changed and deleted rows: the index follows both.
        rows = [from_columns(r) for r in store.domains.page(ws.id, DomainFilter(), sort_by="createdAt", descending=False,
                                                                 after=None, limit=300)]
        for row in rows[:150]:
            store.domains.update(_with_notes(row, f"renamed {row.apex[:5]} ÉTÉ"))
        for row in rows[150:300]:
            store.domains.delete(ws.id, row.id)
    yield store, ws, rng
    store.close()


def _with_notes(row: DomainRow, notes: str) -> DomainRow:
    import attrs

    return attrs.evolve(row, notes=notes)


_CORPUS: dict[tuple[int, uuid.UUID], list[tuple[uuid.UUID, str, list[str]]]] = {}


def scanned(store: Store, ws: Workspace, q: str) -> set[uuid.UUID]:
    """What ``q`` means, computed in Python from every row: a substring of the apex (or of its
    hostname form), of the folded notes, or of any one folded tag."""
    key = (id(store), ws.id)
    if key not in _CORPUS:
        rows = store.domains.page(ws.id, DomainFilter(), sort_by="createdAt", descending=False, after=None, limit=100_000)
        _CORPUS[key] = [(uuid.UUID(row["id"]), row["apex"], search_text(row["notes"], json.loads(row["tags"])).split("\n")) for row in rows]
    folded, hostname = fold(q), _as_hostname(q.lower())
    return {row_id for row_id, apex, texts in _CORPUS[key]
            if folded in apex or any(folded in text for text in texts) or (hostname and hostname in apex)}


def indexed(store: Store, ws: Workspace, q: str, *, sparse: bool) -> set[uuid.UUID]:
    f = DomainFilter(q=fold(q), q_hostname=_as_hostname(q.lower()))
    rows = store.domains.page(ws.id, f, sort_by="createdAt", descending=False, after=None, limit=10_000, sparse=sparse)
    return {uuid.UUID(row["id"]) for row in rows}


def terms(rng: random.Random, store: Store, count: int) -> list[str]:
    """Substrings of stored text (apexes, notes, tags), in various cases, and strings that match nothing."""
    texts = [t for (apex, notes, tags) in store.db.execute("SELECT apex, notes, tags FROM domains").fetchall()
             for t in (apex, notes or "", tags)]
    found: list[str] = []
    while len(found) < count:
        kind = rng.random()
        if kind < 0.7:
            text = rng.choice(texts)
            start = rng.randrange(max(1, len(text)))
            term = text[start:start + rng.randint(1, 12)]
            found.append(term.upper() if rng.random() < 0.3 else term)
        else:
            found.append("".join(rng.choice("abcxyz%_ é.-") for _ in range(rng.randint(1, 8))))
        if not found[-1].strip() or not found[-1].isprintable():
            found.pop()
    return found


def test_the_index_finds_what_a_scan_finds_for_600_terms(world):
    store, ws, rng = world
    for q in terms(rng, store, 600):
        expected = scanned(store, ws, q)
        assert indexed(store, ws, q, sparse=True) == expected, q
        assert store.domains.count(ws.id, DomainFilter(q=fold(q), q_hostname=_as_hostname(q.lower()))) == len(expected), q


def test_both_strategies_agree(world):
    store, ws, rng = world
    for q in terms(rng, store, 200):
        assert indexed(store, ws, q, sparse=False) == indexed(store, ws, q, sparse=True), q


def test_unicode_folding_is_found_through_the_index(world):
    store, ws, _ = world
    for q in ("école", "ÉCOLE", "strasse", "STRASSE", "über", "ÉTÉ", "ﬁle", "σίσυφος"):
        assert text_match(fold(q), None) is not None, q  # long enough to come from the index
        assert indexed(store, ws, q, sparse=True) == scanned(store, ws, q) != set(), q


def test_terms_shorter_than_a_trigram_are_answered_by_a_scan(world):
    store, ws, _ = world
    assert text_match("x", None) is None and text_match("ab", None) is None
    assert indexed(store, ws, "x", sparse=True) == scanned(store, ws, "x") != set()


def test_another_workspaces_rows_are_never_found(world):
    store, ws, _ = world
    other_only = {row_id for (row_id,) in store.db.execute("SELECT id FROM domains WHERE workspace_id != ?", [str(ws.id)])}
    assert not {str(i) for i in indexed(store, ws, "shop", sparse=True)} & other_only


def test_an_existing_database_gets_its_index(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    rng = random.Random(1)
    ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
    with store.transaction():
        store.accounts.insert_workspace(ws)
        store.domains.insert_many([random_domain(rng, ws, n) for n in range(200)])
        for trigger in ("insert", "delete", "update", "workspace_delete"):  # as a database of schema 10 was
            store.db.execute(f"DROP TRIGGER domain_text_{trigger}")
        store.db.execute("DROP TABLE domain_text")
        store.db.execute("DELETE FROM schema_migrations WHERE version = 11")
    assert apply_migrations(store) == [11]
    for q in ("shop", "école", "cafe", "eu-west1"):
        assert indexed(store, ws, q, sparse=True) == scanned(store, ws, q), q
    store.close()


def test_a_deleted_workspaces_rows_leave_the_index_before_its_rowid_is_reused(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    rng = random.Random(2)
    gone = Workspace(id=uuid.uuid4(), name="gone", created_at=NOW, ownership_token="g")
    with store.transaction():
        store.accounts.insert_workspace(gone)
        store.domains.insert_many([random_domain(rng, gone, n) for n in range(50)])
    with store.transaction():
        store.db.execute("DELETE FROM workspaces WHERE id = ?", [str(gone.id)])
    store.domains.cache.forget_all()
    new = Workspace(id=uuid.uuid4(), name="new", created_at=NOW, ownership_token="n")
    store.accounts.insert_workspace(new)  # the same rowid as the deleted one: the last
    assert store.domains.count(new.id, DomainFilter(q="com")) == 0
    assert store.db.execute("SELECT count(*) FROM domain_text").fetchone() == (0,)
    store.close()


def test_the_count_by_phrase_agrees_with_the_scan(world, monkeypatch):
    """Counts over ``CHECKED_ONE_BY_ONE`` candidates come from the phrase: forced here for every term."""
    store, ws, rng = world
    monkeypatch.setattr(domains_module, "CHECKED_ONE_BY_ONE", 0)
    for q in terms(rng, store, 500):
        expected = scanned(store, ws, q)
        assert store.domains.count(ws.id, DomainFilter(q=fold(q), q_hostname=_as_hostname(q.lower()))) == len(expected), q


def test_an_idns_a_label_in_a_note_is_not_counted_as_a_match_of_its_u_label(tmp_path, monkeypatch):
    monkeypatch.setattr(domains_module, "CHECKED_ONE_BY_ONE", 0)  # the count that would come from the phrase
    store = Store(tmp_path / "db.sqlite3")
    ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
    in_apex, in_note = (attrs.evolve(random_domain(random.Random(n), ws, n), apex=apex, notes=notes)
                        for n, (apex, notes) in enumerate([("xn--bcher-kva.example", None),
                                                           ("shop.example", "see xn--bcher-kva")]))
    with store.transaction():
        store.accounts.insert_workspace(ws)
        store.domains.insert_many([in_apex, in_note])
    f = DomainFilter(q=fold("bücher"), q_hostname=_as_hostname("bücher"))
    assert store.domains.count(ws.id, f) == len(scanned(store, ws, "bücher")) == 1
    store.close()
