"""The operator's commands for PostgreSQL: ``copy-to-postgres`` from a running SQLite service, and
``check-config`` reading the connection and the migration level."""

from __future__ import annotations

import shutil
import subprocess
import sys

import psycopg
import pytest

from core.crypto import load_or_create_master_key
from store.migrations import latest_version
from tests.servers.oidc import CLIENT_ID
from tests.servers.service import ROOT, ServiceProcess, call, run_app_here, signed_up
from tests.servers.service import run_app as run


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A running SQLite service with one signed-up workspace and its domain."""
    service, _ = signed_up(tmp_path_factory.mktemp("live"))
    yield service
    service.stop()


def postgres_config(tmp_path, url: str, issuer: str) -> str:
    path = tmp_path / "pg.toml"
    path.write_text(f'[storage]\nurl = "{url}"\nsecret_key_file = "{tmp_path / "secret.key"}"\n'
                    f'[oidc]\nissuer = "{issuer}"\nclient_id = "{CLIENT_ID}"\n')
    return str(path)


class TestCopyToPostgres:
    def test_a_running_services_rows_are_copied_and_counted(self, live, postgres_url):
        result = run(live.config, "copy-to-postgres", postgres_url)
        assert result.returncode == 0, result.stderr
        assert "  domains: 1" in result.stdout and "  workspaces: 1" in result.stdout
        with psycopg.connect(postgres_url) as pg:
            assert pg.execute("SELECT apex FROM domains").fetchall() == [("shop.example.com",)]

    def test_a_database_with_rows_is_refused_in_one_line(self, live, postgres_url):
        assert run(live.config, "copy-to-postgres", postgres_url).returncode == 0
        result = run(live.config, "copy-to-postgres", postgres_url)
        assert result.returncode == 2
        assert result.stderr.strip().startswith("copy-to-postgres: the PostgreSQL database is not empty (workspaces: 1 rows")
        assert len(result.stderr.strip().splitlines()) == 1

    def test_an_unreachable_database_is_refused_in_one_line(self, live):
        result = run(live.config, "copy-to-postgres", "postgresql://cps:secret@127.0.0.1:9/cps")
        assert result.returncode == 2 and result.stderr.startswith("copy-to-postgres: postgresql://cps@127.0.0.1:9/cps:")
        assert "secret" not in result.stderr

    def test_backup_refuses_a_postgresql_database(self, tmp_path, postgres_url, oidc_issuer):
        result = run(postgres_config(tmp_path, postgres_url, oidc_issuer.issuer), "backup", str(tmp_path / "b"))
        assert result.returncode == 2 and "pg_dump" in result.stderr


class TestCheckConfigOnPostgres:
    def test_an_empty_database_is_reached_and_every_migration_is_pending(self, tmp_path, postgres_url, oidc_issuer):
        result = run(postgres_config(tmp_path, postgres_url, oidc_issuer.issuer), "check-config")
        assert result.returncode == 0, result.stderr
        assert f"start-up will migrate it to {latest_version()}" in result.stdout

    def test_a_migrated_database_says_it_will_not_migrate(self, tmp_path, postgres_url, oidc_issuer):
        from store import Store

        Store(url=postgres_url).close()
        result = run(postgres_config(tmp_path, postgres_url, oidc_issuer.issuer), "check-config")
        assert result.returncode == 0, result.stderr
        assert "0 workspaces, 0 domains; schema version" in result.stdout and "will not migrate" in result.stdout

    def test_an_unreachable_database_is_refused_in_one_line(self, tmp_path, oidc_issuer):
        url = "postgresql://cps:secret@127.0.0.1:9/cps"
        result = run(postgres_config(tmp_path, url, oidc_issuer.issuer), "check-config")
        assert result.returncode == 2
        assert result.stderr.startswith("check-config: storage.url: cannot read postgresql://cps@127.0.0.1:9/cps:")
        assert "secret" not in result.stderr and len(result.stderr.strip().splitlines()) == 1

    def test_the_service_does_not_start_on_an_unreachable_database(self, tmp_path, oidc_issuer):
        config = postgres_config(tmp_path, "postgresql://cps@127.0.0.1:9/cps", oidc_issuer.issuer)
        result = subprocess.run([sys.executable, str(ROOT / "app.py"), "--config", config],
                                check=False, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2
        assert result.stderr.splitlines()[-1].startswith("config error: storage.url: cannot use postgresql://cps@127.0.0.1:9/cps: ")
        assert "Connection refused" in result.stderr


#: A password that must never be printed, and database URLs libpq cannot use that hold it.
PASSWORD = "Hunter2Secret"
MALFORMED = {
    "a % escape that is not one": f"postgresql://cps:{PASSWORD}%zz@127.0.0.1:9/cps",
    "a % at the end of the password": f"postgresql://cps:{PASSWORD}%@127.0.0.1:9/cps",
    "an unclosed [ in the host": f"postgresql://cps:{PASSWORD}@[::1:9/cps",
    "a port out of range": f"postgresql://cps:{PASSWORD}@127.0.0.1:99999/cps",
    "a port that is not a number": f"postgresql://cps:{PASSWORD}@127.0.0.1:abc/cps",
    "an unknown query parameter": f"postgresql://cps:{PASSWORD}@127.0.0.1:9/cps?bogus=1",
    "a bad escape in a password in the query": f"postgresql://cps@127.0.0.1:9/cps?password={PASSWORD}%zz",
    "an unencoded @ in the password": f"postgresql://cps:p@{PASSWORD}@127.0.0.1:9/cps",
    "an unencoded / in the password": f"postgresql://cps:{PASSWORD}/x@127.0.0.1:9/cps",
    "a libpq keyword string as the URL's authority": f"postgresql://host=127.0.0.1 port=9 password={PASSWORD}",
    "a percent-encoded keyword string": f"postgresql://host=127.0.0.1%20port=9%20password={PASSWORD}",
    "a quoted password in a keyword string": f"postgresql://host=127.0.0.1 port=9 password='{PASSWORD} x'",
    "spaces around the = of a password": f"postgresql://host=127.0.0.1 port=9 password = {PASSWORD}",
    "a keyword string as the user": f"postgresql://user=cps password={PASSWORD}@127.0.0.1:9/cps",
    "a keyword string as the database": f"postgresql://cps@127.0.0.1:9/cps%20password%3D{PASSWORD}",
    "a keyword string without a scheme": f"host=127.0.0.1 port=9 password={PASSWORD}",
}


@pytest.fixture
def sqlite_config(tmp_path, migrated_sqlite) -> str:
    """A configuration naming an SQLite database and its key file, which exist (a command acts only
    on a database that does)."""
    shutil.copy(migrated_sqlite, tmp_path / "lite.sqlite3")
    load_or_create_master_key(tmp_path / "secret.key")
    path = tmp_path / "lite.toml"
    path.write_text(f'[storage]\npath = "{tmp_path / "lite.sqlite3"}"\nsecret_key_file = "{tmp_path / "secret.key"}"\n')
    return str(path)


@pytest.mark.parametrize("url", MALFORMED.values(), ids=MALFORMED.keys())
class TestThePasswordOfAnUnusableUrlIsNeverPrinted:
    """Each way out of a database URL libpq cannot parse or use. Start-up runs as the operator runs
    it; the commands run in this process (``run_app_here``: the same code, output and exit code),
    as each of them runs as its own process in the tests of its refusals elsewhere in this module."""

    @staticmethod
    def refused_without_the_password(result: subprocess.CompletedProcess[str]) -> None:
        assert result.returncode == 2, result.stdout + result.stderr
        assert PASSWORD not in result.stdout + result.stderr

    def test_by_start_up_logging_at_debug_level(self, tmp_path, oidc_issuer, url):
        config = postgres_config(tmp_path, url, oidc_issuer.issuer)
        with open(config, "a") as more:
            more.write('[server]\nport = 0\n[logging]\nlevel = "debug"\n')
        self.refused_without_the_password(subprocess.run(
            [sys.executable, str(ROOT / "app.py"), "--config", config],
            check=False, capture_output=True, text=True, timeout=60))

    def test_by_check_config(self, tmp_path, oidc_issuer, url):
        self.refused_without_the_password(run_app_here(postgres_config(tmp_path, url, oidc_issuer.issuer), "check-config"))

    def test_by_any_other_command(self, tmp_path, oidc_issuer, url):
        self.refused_without_the_password(run_app_here(postgres_config(tmp_path, url, oidc_issuer.issuer), "list-workspaces"))

    def test_by_copy_to_postgres(self, sqlite_config, url):
        self.refused_without_the_password(run_app_here(sqlite_config, "copy-to-postgres", url))


def test_copy_to_postgres_does_not_echo_a_url_that_is_not_postgresql(sqlite_config):
    result = run(sqlite_config, "copy-to-postgres", f"postgres:/cps:{PASSWORD}@127.0.0.1/cps")
    assert result.returncode == 2 and PASSWORD not in result.stdout + result.stderr


@pytest.mark.parametrize("written", ["postgres:{password}@127.0.0.1", "postgres@127.0.0.1"], ids=["in the user", "in the query"])
def test_a_service_serving_at_debug_level_never_logs_the_password(tmp_path, postgres_url, written):
    """Every log line of a start, a sign-up and a stop, at the level that logs the most."""
    url = postgres_url.replace("postgres@127.0.0.1", written.format(password=PASSWORD))
    url += "" if PASSWORD in url else f"?password={PASSWORD}"
    service = ServiceProcess(tmp_path, dns_address="127.0.0.1:9", storage_url=url, extra='[logging]\nlevel = "debug"\n')
    service.start()
    try:
        assert call(service.base_url, "POST", "/v1/public/signup", {"email": "ops@example.com", "domain": "shop.example.com"})[0] == 201
    finally:
        service.stop()
    log = service.log.read_text()
    assert " DEBUG " in log and f"database {postgres_url}" in log
    assert PASSWORD not in log


class TestACommandOnPostgres:
    def test_acts_on_a_database_holding_the_services_tables(self, tmp_path, postgres_url, oidc_issuer):
        from store import Store

        Store(url=postgres_url).close()
        load_or_create_master_key(tmp_path / "secret.key")
        result = run(postgres_config(tmp_path, postgres_url, oidc_issuer.issuer), "list-workspaces")
        assert (result.returncode, result.stdout) == (0, "no workspace\n"), result.stderr

    def test_refuses_a_database_without_the_services_tables_and_creates_none(self, tmp_path, postgres_url, oidc_issuer):
        load_or_create_master_key(tmp_path / "secret.key")
        result = run(postgres_config(tmp_path, postgres_url, oidc_issuer.issuer), "list-workspaces")
        assert result.returncode == 2
        assert result.stderr.startswith(f"list-workspaces: {postgres_url} holds no tables of this service (storage.url in ")
        with psycopg.connect(postgres_url) as pg:
            assert pg.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone() == (0,)
