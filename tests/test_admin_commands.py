"""The operator's commands, run as an operator runs them: ``python app.py COMMAND --config FILE``,
on the database of a service that is running."""

from __future__ import annotations

import datetime as dt
import os
import re
import sqlite3
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import attrs
import pytest

import app
from core.config import ProviderConfig, SandboxConfig, StorageConfig
from core.runtime import commands
from core.runtime.assembly import build_services
from store.migrations import latest_version
from tests.helpers import OTHER_SPELLINGS, mark_verified, stored_deliveries
from tests.servers.service import ROOT, call, signed_up
from tests.servers.service import run_app as run


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A running service with one signed-up workspace and its domain (no DNS answer is needed)."""
    service, workspace_id = signed_up(tmp_path_factory.mktemp("live"))
    yield service, workspace_id
    service.stop()


class TestHelp:
    def test_help_lists_the_six_commands(self):
        result = subprocess.run([sys.executable, str(ROOT / "app.py"), "--help"], check=False, capture_output=True,
                                text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        for command in ("check-config", "backup", "list-workspaces", "create-api-key", "rebind-user", "purge"):
            assert re.search(rf"^\s+{command}\s+\S", result.stdout, re.MULTILINE), (command, result.stdout)


def files_under(folder) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


class TestCheckConfig:
    def test_a_good_config_is_summarised(self, live):
        service, _ = live
        result = run(service.config, "check-config")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("configuration OK") and "1 workspaces, 1 domains" in result.stdout

    def test_a_fresh_folder_is_checked_without_creating_the_database_or_the_key(self, config, tmp_path):
        fresh = tmp_path / "fresh"
        config = attrs.evolve(config, storage=StorageConfig(path=str(fresh / "service.sqlite3"),
                                                            secret_key_file=str(fresh / "secret.key")))
        lines = commands.check_config(config)
        assert lines[0] == "configuration OK"
        assert f"  database {fresh / 'service.sqlite3'} (does not exist yet: created at the first start)" in lines
        assert any(line.startswith(f"  secret key file {fresh / 'secret.key'} (does not exist yet") for line in lines)
        assert not fresh.exists()

    def test_a_database_at_rest_is_read_without_creating_any_file(self, config, tmp_path):
        services = build_services(config)
        services.close()  # the service stopped: its -wal and -shm files are gone
        before = files_under(tmp_path)
        lines = commands.check_config(config)
        assert (f"  database {tmp_path / 'service.sqlite3'} (0 workspaces, 0 domains; schema version {latest_version()}, "
                "as this code writes it: start-up will not migrate)") in lines
        assert files_under(tmp_path) == before

    def test_a_row_committed_only_in_the_wal_of_an_unclean_stop_is_counted(self, config, tmp_path):
        build_services(config).close()
        writer = sqlite3.connect(config.storage.path, isolation_level=None)
        writer.execute("PRAGMA wal_autocheckpoint = 0")  # the row stays in the -wal file
        writer.execute("INSERT INTO workspaces (id, name, created_at) VALUES (?, 'Acme', '2024-01-01T00:00:00Z')",
                       (str(uuid.uuid4()),))
        crashed = tmp_path / "crashed"  # what an unclean stop leaves: the database and its -wal, no -shm
        crashed.mkdir()
        for suffix in ("", "-wal"):
            (crashed / f"service.sqlite3{suffix}").write_bytes(Path(f"{config.storage.path}{suffix}").read_bytes())
        writer.close()
        config = attrs.evolve(config, storage=attrs.evolve(config.storage, path=str(crashed / "service.sqlite3")))
        assert any(line.startswith(f"  database {crashed / 'service.sqlite3'} (1 workspaces, 0 domains;")
                   for line in commands.check_config(config))

    def test_the_command_creates_nothing_in_a_fresh_folder(self, tmp_path):
        config = tmp_path / "fresh.toml"
        config.write_text(f'[storage]\npath = "{tmp_path}/data/service.sqlite3"\nsecret_key_file = "{tmp_path}/data/secret.key"\n')
        result = run(config, "check-config")
        assert result.returncode == 0, result.stderr
        assert "does not exist yet" in result.stdout
        assert files_under(tmp_path) == {"fresh.toml"}

    def test_the_sandbox_says_its_certificates_are_simulated(self, config):
        lines = commands.check_config(config)
        assert "  edge provider sandbox: certificates are SIMULATED (development only; none is publicly trusted)" in lines
        assert not any("DNS is SIMULATED" in line for line in lines)

    def test_simulated_dns_is_said_with_its_delay(self, config):
        sandbox = SandboxConfig(simulate_dns=True, simulate_dns_delay_seconds=5)
        lines = commands.check_config(attrs.evolve(config, provider=ProviderConfig(kind="sandbox", sandbox=sandbox)))
        assert any(line.startswith("  DNS is SIMULATED ([provider.sandbox] simulate_dns = true): every domain's two "
                                   "records count as published 5 s after it is added") for line in lines)

    def test_a_bad_config_is_one_line_and_exit_2(self, tmp_path):
        config = tmp_path / "bad.toml"
        config.write_text("[server]\nport = 'eighty'\n")
        result = run(config, "check-config")
        assert result.returncode == 2
        assert result.stderr.startswith("config error: server.port") and result.stderr.count("\n") == 1

    def test_a_database_path_that_cannot_be_examined_is_one_line_naming_it_and_exit_2(self, tmp_path):
        # A name too long to stat fails for root too, as a data folder the user cannot enter does.
        database = tmp_path / ("x" * 300) / "service.sqlite3"
        config = tmp_path / "unreadable.toml"
        config.write_text(f'[storage]\npath = "{database}"\nsecret_key_file = "{tmp_path}/secret.key"\n')
        result = run(config, "check-config")
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert str(database) in result.stderr and "as the service's user" in result.stderr

    def test_a_secret_key_file_that_cannot_be_examined_is_refused_naming_it(self, config, tmp_path):
        key_file = tmp_path / ("x" * 300) / "secret.key"
        config = attrs.evolve(config, storage=attrs.evolve(config.storage, secret_key_file=str(key_file)))
        with pytest.raises(commands.CommandError, match=r"storage\.secret_key_file: cannot read .*as the service's user"):
            commands.check_config(config)

    def test_a_missing_ca_bundle_is_refused_as_at_start_up(self, config, tmp_path):
        config = attrs.evolve(config, network=attrs.evolve(config.network, ca_bundle=str(tmp_path / "absent.pem")))
        with pytest.raises(commands.CommandError, match=r"network\.ca_bundle: cannot load .*absent\.pem"):
            commands.check_config(config)

    def test_a_ca_bundle_holding_no_certificate_is_refused_as_at_start_up(self, config, tmp_path):
        garbage = tmp_path / "garbage.pem"
        garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
        config = attrs.evolve(config, network=attrs.evolve(config.network, ca_bundle=str(garbage)))
        with pytest.raises(commands.CommandError, match=r"network\.ca_bundle: cannot load .*garbage\.pem"):
            commands.check_config(config)


class TestBackup:
    def test_a_live_database_is_copied_whole_and_private(self, live, tmp_path):
        service, _ = live
        target = tmp_path / "copy.sqlite3"
        result = run(service.config, "backup", str(target))
        assert result.returncode == 0, result.stderr
        assert "integrity ok" in result.stdout and "secret key file" in result.stdout
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
        copy = sqlite3.connect(target)
        assert copy.execute("SELECT apex FROM domains").fetchall() == [("shop.example.com",)]

    def test_an_existing_file_is_never_overwritten(self, live, tmp_path):
        service, _ = live
        target = tmp_path / "taken"
        target.write_text("precious")
        result = run(service.config, "backup", str(target))
        assert result.returncode == 2 and "already exists" in result.stderr
        assert target.read_text() == "precious"

    def test_a_dangling_symbolic_link_is_refused_in_one_line(self, live, tmp_path):
        service, _ = live
        target = tmp_path / "link"
        target.symlink_to(tmp_path / "nowhere")
        result = run(service.config, "backup", str(target))
        assert (result.returncode, result.stderr) == (2, f"backup: {target} already exists (a symbolic link); choose a new file\n")
        assert not (tmp_path / "nowhere").exists()

    def test_a_folder_that_is_a_file_is_refused_in_one_line(self, live, tmp_path):
        service, _ = live
        target = tmp_path / "a-folder"
        target.mkdir()
        (target / "copy.sqlite3").write_text("a file")
        result = run(service.config, "backup", str(target / "copy.sqlite3" / "deeper"))
        assert (result.returncode, result.stderr) == (2, f"backup: the folder {target / 'copy.sqlite3'} does not exist\n")


class TestQuietCommands:
    @pytest.mark.parametrize("command", [["purge"], ["check-config"]])
    def test_a_command_does_not_print_the_serving_warnings(self, live, command):
        service, _ = live
        result = run(service.config, *command)
        assert result.returncode == 0, result.stderr
        assert "SANDBOX" not in result.stderr and "DEVELOPMENT" not in result.stderr and result.stderr == ""


class TestListWorkspaces:
    def test_each_workspace_is_listed_with_its_id_name_and_owners(self, live):
        service, workspace = live
        result = run(service.config, "list-workspaces")
        assert result.returncode == 0, result.stderr
        [line] = [line for line in result.stdout.splitlines() if line.startswith(workspace)]
        assert line.split("  ")[2] == "owners: ops@example.com"

    def test_the_listed_id_is_what_create_api_key_takes(self, live):
        service, _ = live
        workspace = run(service.config, "list-workspaces").stdout.split()[0]
        assert run(service.config, "create-api-key", "--workspace", workspace, "--scopes", "*").returncode == 0

    def test_one_person_s_workspaces_by_e_mail(self, live):
        service, workspace = live
        assert run(service.config, "list-workspaces", "--email", "OPS@example.com").stdout.split()[0] == workspace
        assert run(service.config, "list-workspaces", "--email", "nobody@example.com").stdout == "no workspace\n"


class TestCreateApiKey:
    def test_the_printed_key_works_against_the_running_service(self, live):
        service, workspace = live
        result = run(service.config, "create-api-key", "--workspace", workspace, "--scopes", "domains:read", "--name", "ci")
        assert result.returncode == 0, result.stderr
        secret = result.stdout.splitlines()[1]
        assert secret.startswith("ac_live_")
        status, body = call(service.base_url, "POST", "/v1/domains/query", {}, token=secret)
        assert (status, body["total"]) == (200, 1)

    def test_an_unknown_scope_is_refused_with_the_reason(self, live):
        service, workspace = live
        result = run(service.config, "create-api-key", "--workspace", workspace, "--scopes", "domains:everything")
        assert result.returncode == 2 and "scopes" in result.stderr and "domains:everything" in result.stderr

    def test_a_date_alone_expires_the_key_at_the_start_of_that_day_utc(self, live):
        service, workspace = live
        result = run(service.config, "create-api-key", "--workspace", workspace, "--scopes", "domains:read",
                     "--expires-at", "2030-01-01")
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0].endswith(", expires 2030-01-01 00:00:00 UTC")

    def test_a_time_with_its_offset_is_taken_as_it_is(self, live):
        service, workspace = live
        result = run(service.config, "create-api-key", "--workspace", workspace, "--scopes", "domains:read",
                     "--expires-at", "2030-01-01T12:30:00+02:00")
        assert result.stdout.splitlines()[0].endswith(", expires 2030-01-01 10:30:00 UTC"), result.stderr

    def test_a_workspace_id_in_another_spelling_is_refused(self, live):
        """Issue 45, item 3: the command reads ids by the API's one rule (the form list-workspaces prints)."""
        service, workspace = live
        result = run(service.config, "create-api-key", "--workspace", OTHER_SPELLINGS["uppercase"](workspace), "--scopes", "*")
        assert result.returncode == 2 and "must be a workspace id" in result.stderr

    def test_an_unknown_workspace_is_refused(self, live):
        service, _ = live
        result = run(service.config, "create-api-key", "--workspace", str(uuid.uuid4()), "--scopes", "*")
        assert result.returncode == 2 and "no workspace" in result.stderr


class TestPurge:
    """``purge`` runs on the system clock: the tests set the service's clock to it first."""

    def test_old_delivered_deliveries_go_and_the_rest_stay(self, services, world, clock, tmp_path, capsys):
        clock.current = dt.datetime.now(dt.UTC)
        owner = world.owner()
        old, recent, failed = stored_deliveries(services, owner.workspace, ("delivered", 40), ("delivered", 5), ("failed", 40))
        assert app.main(["purge", "--config", str(config_file(services, tmp_path))]) == 0
        assert "purged 1 delivered webhook delivery" in capsys.readouterr().out
        left = {r[0] for r in services.store.db.execute("SELECT id FROM webhook_deliveries")}
        assert left == {str(recent), str(failed)}
        attempts = {r[0] for r in services.store.db.execute("SELECT delivery_id FROM webhook_attempts")}
        assert str(old) not in attempts

    @pytest.mark.gen_test
    async def test_idempotency_records_past_24_hours_go_and_fresh_ones_stay(self, api, services, world, clock, tmp_path, capsys):
        now = dt.datetime.now(dt.UTC)
        token = world.key(world.owner().workspace, ["*"])  # a key: a session would expire as the clock moves

        async def issue(domain, key):
            return await api.post(f"/v1/domains/{domain['id']}/certificates/issue", {}, token=token,
                                  headers={"Idempotency-Key": key})

        old, fresh = [(await api.post("/v1/domains", {"apex": apex}, token=token)).body
                      for apex in ("old.example.com", "fresh.example.com")]
        for domain in (old, fresh):
            mark_verified(services, domain)
        clock.current = now - dt.timedelta(hours=25)
        await issue(old, "k-old")
        clock.current = now - dt.timedelta(hours=1)
        await issue(fresh, "k-fresh")
        assert app.main(["purge", "--config", str(config_file(services, tmp_path))]) == 0
        assert "purged 1 idempotency record(s) older than 24 hours" in capsys.readouterr().out
        clock.current = now
        assert (await issue(fresh, "k-fresh")).headers.get("Idempotent-Replayed") == "true"
        assert "Idempotent-Replayed" not in (await issue(old, "k-old")).headers  # forgotten: run again


def config_file(services, tmp_path):
    path = tmp_path / "ops.toml"
    storage = services.config.storage
    path.write_text(f'[storage]\npath = "{storage.path}"\nsecret_key_file = "{storage.secret_key_file}"\n')
    return path


class TestRebindUser:
    """After a switch of identity provider, users bound to the old one sign in again by verified e-mail."""

    OLD = "http://127.0.0.1:8080/idp"

    @pytest.fixture
    def switched(self, services, world):
        owner = world.owner("ops@example.com")
        services.store.accounts.link_user(owner.user.id, issuer=self.OLD, subject="dev-subject")
        return owner

    @pytest.mark.gen_test
    async def test_a_user_bound_to_the_old_provider_is_locked_out_before(self, api, switched):
        assert (await api.get("/v1/auth/session", token=switched.token)).code == "forbidden"

    @pytest.mark.gen_test
    async def test_after_rebinding_by_issuer_the_next_sign_in_binds_again(self, api, services, switched, tmp_path, capsys):
        assert app.main(["rebind-user", "--from-issuer", self.OLD, "--config", str(config_file(services, tmp_path))]) == 0
        assert "unbound 1 user(s): ops@example.com" in capsys.readouterr().out
        r = await api.get("/v1/auth/session", token=switched.token)
        assert (r.status, r.body["org"]["id"]) == (200, str(switched.workspace.id))

    @pytest.mark.gen_test
    async def test_rebinding_one_user_by_email(self, api, services, switched, tmp_path, capsys):
        assert app.main(["rebind-user", "--email", "OPS@example.com", "--config", str(config_file(services, tmp_path))]) == 0
        assert (await api.get("/v1/auth/session", token=switched.token)).status == 200

    def test_nothing_matched_changes_nothing(self, services, switched, tmp_path, capsys):
        assert app.main(["rebind-user", "--email", "nobody@example.com", "--config", str(config_file(services, tmp_path))]) == 0
        assert "nothing changed" in capsys.readouterr().out
        assert services.store.accounts.user_by_subject(self.OLD, "dev-subject") is not None
