"""Upgrades and downgrades (docs/operating/upgrades.md): migrations run at start; a database a
newer version migrated stops start-up in one line naming both versions, exit code 2, before
anything is written; ``check-config`` says whether start-up would migrate."""

from __future__ import annotations

import sqlite3

import pytest

from core.runtime.assembly import build_services
from store.migrations import latest_version
from store.sqlite.schema import MIGRATIONS
from tests.servers.service import run_app as run


@pytest.fixture
def config_path(config, tmp_path):
    """A configuration file for the test's database, which exists and is migrated."""
    build_services(config).close()
    path = tmp_path / "service.toml"
    path.write_text(f'[storage]\npath = "{config.storage.path}"\nsecret_key_file = "{config.storage.secret_key_file}"\n'
                    '[server]\nport = 0\n')
    return path


def record_version(config, version: int) -> None:
    db = sqlite3.connect(config.storage.path)
    with db:
        db.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from the future', "
                   "'2027-01-01T00:00:00.000Z')", [version])
    db.close()


def forget_version(config, version: int) -> None:
    db = sqlite3.connect(config.storage.path)
    with db:
        db.execute("DELETE FROM schema_migrations WHERE version = ?", [version])
    db.close()


def test_a_database_newer_than_the_code_stops_start_up_in_one_line_with_exit_2(config, config_path):
    record_version(config, latest_version() + 1)
    result = run(config_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    refusal = [line for line in result.stderr.splitlines() if "newer than this code's" in line]
    assert refusal == [(f"config error: storage.path: the database's schema is version {latest_version() + 1}, newer "
                        f"than this code's {latest_version()}: run the newer version of the service, or restore the "
                        "backup taken before the upgrade")]


def test_a_newer_database_is_left_as_it_was(config, config_path):
    record_version(config, latest_version() + 1)
    with open(config.storage.path, "rb") as file:
        before = file.read()
    run(config_path)
    with open(config.storage.path, "rb") as file:
        assert file.read() == before


def test_a_command_refuses_a_newer_database_too(config, config_path):
    record_version(config, latest_version() + 1)
    result = run(config_path, "list-workspaces")
    assert result.returncode == 2 and "newer than this code's" in result.stderr


def test_check_config_refuses_a_newer_database(config, config_path):
    record_version(config, latest_version() + 1)
    result = run(config_path, "check-config")
    assert result.returncode == 2 and "newer than this code's" in result.stderr


def test_check_config_says_start_up_will_migrate_an_older_database(config, config_path):
    forget_version(config, latest_version())
    result = run(config_path, "check-config")
    assert result.returncode == 0
    previous = sorted(version for version, _, _ in MIGRATIONS)[-2]
    assert f"schema version {previous}: start-up will migrate it to {latest_version()}" in result.stdout


def test_check_config_says_start_up_will_not_migrate_a_current_database(config_path):
    result = run(config_path, "check-config")
    assert f"schema version {latest_version()}, as this code writes it: start-up will not migrate" in result.stdout
