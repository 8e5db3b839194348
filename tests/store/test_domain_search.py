"""store.domains: the folded search text that ``q`` is matched in (migration 8)."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from store import Store
from store.domains import DomainFilter, fold
from store.migrations import apply_migrations
from store.records import DomainRow, Workspace

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "db.sqlite3")
    yield s
    s.close()


def domain(ws: Workspace, apex: str, *, notes: str | None = None, tags: list[str] | None = None) -> DomainRow:
    return DomainRow(
        id=uuid.uuid4(), workspace_id=ws.id, apex=apex, notes=notes, tags=tags or [], created_at=NOW, updated_at=NOW,
        delegation_target="t", validation_status="pending", cert_status="none", ops_status="pending", ownership_token="t",
    )


def test_the_migration_fills_in_the_search_text_of_domains_already_stored(store):
    ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
    store.accounts.insert_workspace(ws)
    store.domains.insert(domain(ws, "a.example.com", notes="ÉCOLE"))
    store.domains.insert(domain(ws, "b.example.com", tags=["Über"]))
    with store.transaction():  # as a database of schema 7 was: no search text yet (nor its index, 11)
        for trigger in ("insert", "delete", "update", "workspace_delete"):
            store.db.execute(f"DROP TRIGGER domain_text_{trigger}")
        store.db.execute("DROP TABLE domain_text")
        store.db.execute("ALTER TABLE domains DROP COLUMN search_text")
        store.db.execute("DELETE FROM schema_migrations WHERE version IN (8, 11)")
    assert apply_migrations(store) == [8, 11]
    store.domains.forget_all()
    assert store.domains.count(ws.id, DomainFilter(q=fold("école"))) == 1
    assert store.domains.count(ws.id, DomainFilter(q=fold("ÜBER"))) == 1
