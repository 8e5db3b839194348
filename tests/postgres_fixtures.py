"""PostgreSQL fixtures (tests/conftest.py imports them).

- ``postgres_server``: one real PostgreSQL server per test session (tests/servers/postgres.py);
  the tests that use it are skipped, saying why, where PostgreSQL is not installed.
- ``postgres_url``: a fresh empty database on it for one test, dropped afterwards even if the test
  left connections open (a pool it did not close).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.servers.postgres import PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    reason = PostgresServer.available()
    if reason:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    url = postgres_server.create_database()
    yield url
    postgres_server.drop_database(urlsplit(url).path.lstrip("/"))


@pytest.fixture(scope="session")
def api_database(postgres_server: PostgresServer) -> Iterator[str]:
    """One database for the API tests on PostgreSQL, migrated by the first test's store and
    emptied after each test (``backend``), which costs far less than a database per test."""
    url = postgres_server.create_database("cps_api")
    yield url
    if url in _emptying:
        _emptying.pop(url).close()
    postgres_server.drop_database("cps_api")


#: The connection ``empty`` uses, kept for the session: a new one each time started a server
#: process with cold caches that read the catalog for every table, 41 ms of the server's CPU a test.
_emptying: dict[str, psycopg.Connection[tuple[object, ...]]] = {}


def empty(url: str) -> None:
    """Every table's rows gone (the schema and its migrations stay). DELETE with the triggers off
    (foreign keys included): a test leaves a few rows, where TRUNCATE's cost is per table. All the
    DELETEs go in one round trip: one each cost a fifth of a PostgreSQL API test's time."""
    conn = _emptying.get(url)
    if conn is not None:
        try:
            return _delete_all(conn)
        except psycopg.OperationalError:  # the server was restarted (tests/test_postgres_processes.py)
            conn.close()
    conn = _emptying[url] = psycopg.connect(url, autocommit=True)
    _delete_all(conn)


def _delete_all(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    tables = [r[0] for r in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'schema_migrations'"
    )]
    # No parameters: psycopg sends the statements as one simple query, run as one transaction.
    conn.execute("SET LOCAL session_replication_role = replica; "
                 + "".join(f"DELETE FROM {table}; " for table in tables))
