"""store.postgres.copy: a SQLite database's rows land in an empty PostgreSQL database, all or nothing."""

from __future__ import annotations

import datetime as dt
import uuid

import psycopg
import pytest

from store import Store
from store.domains import DomainFilter
from store.postgres.copy import TABLES, CopyRefused, copy, snapshot
from store.records import DomainRow, Membership, User, Workspace

NOW = dt.datetime(2026, 11, 26, tzinfo=dt.UTC)


def filled(path) -> tuple[Store, Workspace]:
    store = Store(path)
    ws = Workspace(id=uuid.uuid4(), name="Acme", created_at=NOW, ownership_token="tok")
    user = User(id=uuid.uuid4(), email="owner@example.com", created_at=NOW)
    with store.transaction():
        store.accounts.insert_workspace(ws)
        store.accounts.insert_user(user)
        store.accounts.insert_membership(Membership(workspace_id=ws.id, user_id=user.id, role="owner", created_at=NOW))
        for n in range(30):
            store.domains.insert(DomainRow(
                id=uuid.uuid4(), workspace_id=ws.id, apex=f"shop{n}.example.com", tags=["vip"] if n % 3 else [],
                created_at=NOW, updated_at=NOW, delegation_target="t.example.net", validation_status="pending",
                cert_status="none", ops_status="pending", ownership_token="tok", notes="École" if n == 4 else None,
            ))
    return store, ws


def test_every_row_is_copied_and_the_copy_answers_the_same(tmp_path, postgres_url):
    source, ws = filled(tmp_path / "db.sqlite3")
    copied = copy(snapshot(source.db.conn, str(tmp_path)), postgres_url)
    assert copied["domains"] == 30 and copied["domain_tags"] == 20 and copied["memberships"] == 1
    target = Store(url=postgres_url)
    try:
        for f in (DomainFilter(), DomainFilter(tags=["vip"]), DomainFilter(q="école")):
            assert target.domains.count(ws.id, f) == source.domains.count(ws.id, f)
        assert target.accounts.workspaces_with_owners(member_email=None) == source.accounts.workspaces_with_owners(
            member_email=None)
    finally:
        target.close()
        source.close()


def test_a_database_with_rows_is_refused_and_left_as_it_was(tmp_path, postgres_url):
    source, _ = filled(tmp_path / "db.sqlite3")
    path = snapshot(source.db.conn, str(tmp_path))
    copy(path, postgres_url)
    with pytest.raises(CopyRefused, match="not empty"):
        copy(path, postgres_url)
    with psycopg.connect(postgres_url) as pg:
        assert pg.execute("SELECT count(*) FROM domains").fetchone() == (30,)
    source.close()


def test_a_failed_copy_leaves_nothing_behind(tmp_path, postgres_url):
    source, _ = filled(tmp_path / "db.sqlite3")
    source.sql.execute("PRAGMA foreign_keys = OFF")  # a row PostgreSQL refuses, late in the copy
    source.sql.execute("INSERT INTO one_click_starts VALUES ('h', 'w', 'no-such-domain', 'a', 'b', 'c', NULL)")
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        copy(snapshot(source.db.conn, str(tmp_path)), postgres_url)
    Store(url=postgres_url).close()
    with psycopg.connect(postgres_url) as pg:
        assert [pg.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES] == [0] * len(TABLES)
    source.close()
