"""PostgreSQL fixtures (tests/conftest.py imports them).

- ``postgres_server``: one real PostgreSQL server per test session (tests/servers/postgres.py);
  the tests that use it are skipped, saying why, where PostgreSQL is not installed.
- ``postgres_url``: a fresh empty database on it for one test, dropped afterwards even if the test
  left connections open (a pool it did not close).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

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
