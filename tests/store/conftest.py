"""The store's tests run on both backends: ``open_store()`` opens a Store on the test's own database,
a SQLite file or a fresh PostgreSQL database. Two calls open two Stores on one database, as two
service processes would. Every Store opened is closed after the test.

A fresh PostgreSQL database is a copy of one migrated once per session (``pg_databases``): copying
costs a fraction of migrating, and the store's tests make one for each test. The migrations
themselves still run on every Store opened (there is nothing left to apply), and tests/store/
test_store.py checks them on an empty database too.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import sql

from store import Store
from tests.servers.postgres import PostgresServer

BACKENDS = ["sqlite", "postgresql"]

OpenStore = Callable[[], Store]
T = TypeVar("T")


class PgDatabases:
    """Fresh migrated databases on the session's server, copies of a template migrated once."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.template = ""

    def create(self) -> str:
        """A new database, migrated, unused: its URL."""
        if not self.template:
            url = self.server.create_database()
            Store(url=url).close()
            self.template = url.rsplit("/", 1)[1]
        name = f"store_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.server.url(), autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(self.template)))
        return self.server.url(name)

    def drop(self, url: str) -> None:
        self.server.drop_database(url.rsplit("/", 1)[1])


@pytest.fixture(scope="session")
def pg_databases(postgres_server: PostgresServer) -> Iterator[PgDatabases]:
    databases = PgDatabases(postgres_server)
    yield databases
    if databases.template:
        postgres_server.drop_database(databases.template)


@pytest.fixture
def pg_database(pg_databases: PgDatabases) -> Iterator[str]:
    """The URL of a fresh migrated PostgreSQL database of the test's own."""
    url = pg_databases.create()
    yield url
    pg_databases.drop(url)


@pytest.fixture(params=BACKENDS)
def store_backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgresql``: each test that uses a store runs once on each."""
    return str(request.param)


@pytest.fixture
def open_store(store_backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens a Store on the test's database."""
    url = request.getfixturevalue("pg_database") if store_backend == "postgresql" else ""
    opened: list[Store] = []

    def open_one() -> Store:
        store = Store(url=url) if url else Store(tmp_path / "db.sqlite3")
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: OpenStore) -> Store:
    """A Store on a fresh database of the test's backend."""
    return open_store()


@pytest.fixture
def both(tmp_path: Path, pg_database: str) -> Iterator[list[Store]]:
    """A new SQLite store and a new PostgreSQL store, to be given the same rows (``write``) and
    asked the same questions (``agree``)."""
    stores = [Store(tmp_path / "db.sqlite3"), Store(url=pg_database)]
    yield stores
    for store in stores:
        store.close()


def write(stores: list[Store], fn: Callable[[Store], Any]) -> None:
    """The same writes to each store, a transaction on each."""
    for store in stores:
        with store.transaction():
            fn(store)


def agree(stores: list[Store], ask: Callable[[Store], T]) -> T:
    """The answer both stores give (the test fails where they differ)."""
    sqlite, postgresql = (ask(store) for store in stores)
    assert sqlite == postgresql
    return sqlite


def drain_from_two_processes(stores: list[Store], claim: Callable[[Store], list[uuid.UUID]]) -> list[uuid.UUID]:
    """Everything both processes claimed, claiming at once until nothing is left."""
    claimed: list[list[uuid.UUID]] = [[], []]

    def drain(i: int) -> None:
        while batch := claim(stores[i]):
            claimed[i].extend(batch)

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return claimed[0] + claimed[1]
