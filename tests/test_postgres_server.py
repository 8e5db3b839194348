"""The PostgreSQL server the storage tests run against (tests/servers/postgres.py)."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from tests import postgres_fixtures
from tests.servers.postgres import PostgresServer

# Until tests/conftest.py offers them to every test (then these two lines go: a second definition here
# would start a second session server).
postgres_server = postgres_fixtures.postgres_server
postgres_url = postgres_fixtures.postgres_url


def query(url: str, statement: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute(statement).fetchall()


def run(url: str, statement: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(statement)


def test_the_server_answers_a_query(postgres_server):
    assert query(postgres_server.url(), "SELECT 1") == [(1,)]


def test_a_created_database_is_empty(postgres_url):
    tables = query(postgres_url, "SELECT tablename FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")
    assert tables == []


def test_each_created_database_is_separate(postgres_server):
    first, second = postgres_server.create_database(), postgres_server.create_database()
    try:
        run(first, "CREATE TABLE only_here (x int)")
        assert query(second, "SELECT to_regclass('only_here')") == [(None,)]
    finally:
        for url in (first, second):
            postgres_server.drop_database(url.rsplit("/", 1)[1])


def test_a_database_is_dropped_while_a_client_is_still_connected(postgres_server):
    url = postgres_server.create_database("left_open")
    with psycopg.connect(url) as lingering:
        postgres_server.drop_database("left_open")
        assert query(postgres_server.url(), "SELECT 1 FROM pg_database WHERE datname = 'left_open'") == []
        with pytest.raises(psycopg.OperationalError):
            lingering.execute("SELECT 1")


@pytest.fixture
def own_server():
    """A server of the test's own, for the tests that stop or kill it."""
    reason = PostgresServer.available()
    if reason:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.stop()


def test_restart_keeps_the_data_and_the_url(own_server):
    url = own_server.create_database("kept")
    run(url, "CREATE TABLE t AS SELECT 42 AS x")
    own_server.restart()
    assert own_server.url("kept") == url
    assert query(url, "SELECT x FROM t") == [(42,)]


def test_committed_data_survives_a_kill(own_server):
    url = own_server.create_database("crashed")
    run(url, "CREATE TABLE t AS SELECT 42 AS x")
    own_server.kill()
    with pytest.raises(psycopg.OperationalError):
        query(url, "SELECT 1")
    own_server.restart()
    assert query(url, "SELECT x FROM t") == [(42,)]


def test_stop_removes_the_folder(own_server):
    folder = own_server.folder
    own_server.stop()
    assert not folder.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root is refused by PostgreSQL")
def test_as_root_the_server_runs_as_another_user(postgres_server):
    [(data_directory,)] = query(postgres_server.url(), "SELECT current_setting('data_directory')")
    assert Path(data_directory).stat().st_uid != 0
    assert Path(f"/proc/{postgres_server.process.pid}").stat().st_uid != 0
