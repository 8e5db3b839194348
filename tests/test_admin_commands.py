"""The operator's commands, on the database of a service that is running. Each runs as an operator
runs it, ``python app.py COMMAND --config FILE``, in the tests of where ``--config`` stands and
of the files a command never creates (``run_placed``); what each does and refuses is tested in
this process (``run_app_here``: the same ``app.main``, its output and exit code), without a new
interpreter's imports each time."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import attrs
import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

import app
from core.config import ProviderConfig, SandboxConfig, StorageConfig
from core.runtime import commands
from core.runtime.assembly import build_services
from store.migrations import latest_version
from tests.helpers import OTHER_SPELLINGS, mark_verified, stored_deliveries
from tests.servers.service import ROOT, call, signed_up
from tests.servers.service import run_app_here as run


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

    def test_the_message_names_what_the_key_file_unlocks_the_acme_keys_too(self, live, tmp_path):
        """Issue 48: an operator in ACME mode must know that the CA accounts' and certificates' keys
        are in the copy, readable only with the key file."""
        service, _ = live
        result = run(service.config, "backup", str(tmp_path / "copy.sqlite3"))
        assert result.returncode == 0, result.stderr
        assert "keep the secret key file with it" in result.stdout and "ACME account and certificate keys" in result.stdout

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


def run_placed(folder: Path, config: Path, where: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python app.py`` with ``--config CONFIG`` before the command or after it, run from ``folder``."""
    placed = ["--config", str(config), *args] if where == "before" else [*args, "--config", str(config)]
    return subprocess.run([sys.executable, str(ROOT / "app.py"), *placed], cwd=folder, check=False,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("where", ["before", "after"])
class TestEveryCommandActsOnTheDatabaseItsConfigurationNames:
    """``--config FILE`` before the command or after it: the command acts on the database the file
    names, run from a folder where the embedded defaults would name another one (./data), which
    nothing may create."""

    OLD_ISSUER = "http://127.0.0.1:8080/idp"

    @pytest.fixture
    def named(self, services, world, clock, tmp_path):
        """The configuration file naming the test's database (one workspace, its owner bound to an
        old issuer, one delivered webhook delivery 40 days old), and the folder the command runs in."""
        clock.current = dt.datetime.now(dt.UTC)  # purge runs on the system clock
        owner = world.owner("ops@example.com")
        services.store.accounts.link_user(owner.user.id, issuer=self.OLD_ISSUER, subject="dev-subject")
        stored_deliveries(services, owner.workspace, ("delivered", 40))
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        yield config_file(services, tmp_path), elsewhere, str(owner.workspace.id)
        assert files_under(elsewhere) == set()

    def test_serve(self, named, services, where):
        config, elsewhere, _ = named
        with config.open("a") as more:
            more.write("[server]\nport = 0\n")
        proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"),
                                 *(["--config", str(config), "serve"] if where == "before" else ["serve", "--config", str(config)])],
                                cwd=elsewhere, stderr=subprocess.PIPE, text=True)
        try:
            lines = []
            for line in proc.stderr:  # ends when the process does, if it never listens
                lines.append(line)
                if "listening on" in line:
                    break
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
            proc.stderr.close()
        assert f"configuration {config}; database {services.config.storage.path};" in lines[0], lines
        assert any("listening on" in line for line in lines), lines

    def test_check_config(self, named, services, where):
        config, elsewhere, _ = named
        result = run_placed(elsewhere, config, where, "check-config")
        assert result.returncode == 0, result.stderr
        assert f"  database {services.config.storage.path} (1 workspaces, 0 domains;" in result.stdout

    def test_domain_connect_template(self, named, where):
        config, elsewhere, _ = named
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (config.parent / "dc.pem").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        (config.parent / "dc.pem").chmod(0o600)
        with config.open("a") as more:
            more.write(f'[domain_connect]\nprovider_id = "named.example"\nservice_id = "tls-hostname"\n'
                       f'private_key_file = "{config.parent / "dc.pem"}"\nkey_host = "keys.named.example"\n')
        result = run_placed(elsewhere, config, where, "domain-connect-template")
        assert result.returncode == 0, result.stderr
        assert '"providerId": "named.example"' in result.stdout

    def test_backup(self, named, where, tmp_path):
        config, elsewhere, workspace = named
        result = run_placed(elsewhere, config, where, "backup", str(tmp_path / "copy.sqlite3"))
        assert result.returncode == 0, result.stderr
        copy = sqlite3.connect(tmp_path / "copy.sqlite3")
        assert copy.execute("SELECT id FROM workspaces").fetchall() == [(workspace,)]
        copy.close()

    def test_copy_to_postgres(self, named, where, postgres_url):
        config, elsewhere, workspace = named
        result = run_placed(elsewhere, config, where, "copy-to-postgres", postgres_url)
        assert result.returncode == 0, result.stderr
        with psycopg.connect(postgres_url) as pg:
            assert pg.execute("SELECT id::text FROM workspaces").fetchall() == [(workspace,)]

    def test_list_workspaces(self, named, where):
        config, elsewhere, workspace = named
        result = run_placed(elsewhere, config, where, "list-workspaces")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"{workspace}  Acme  owners: ops@example.com")

    def test_create_api_key(self, named, where, services):
        config, elsewhere, workspace = named
        result = run_placed(elsewhere, config, where, "create-api-key", "--workspace", workspace, "--scopes", "*")
        assert result.returncode == 0, result.stderr
        assert f"for workspace {workspace}" in result.stdout

    def test_rebind_user(self, named, where):
        config, elsewhere, _ = named
        result = run_placed(elsewhere, config, where, "rebind-user", "--from-issuer", self.OLD_ISSUER)
        assert result.returncode == 0, result.stderr
        assert "unbound 1 user(s): ops@example.com" in result.stdout

    def test_purge(self, named, where):
        config, elsewhere, _ = named
        result = run_placed(elsewhere, config, where, "purge")
        assert result.returncode == 0, result.stderr
        assert "purged 1 delivered webhook delivery" in result.stdout


#: The commands that open the service's database (check-config and domain-connect-template write nothing).
OPENING = {"backup": ["backup", "copy.sqlite3"], "copy-to-postgres": ["copy-to-postgres", "postgresql://cps@127.0.0.1:9/cps"],
           "list-workspaces": ["list-workspaces"], "purge": ["purge"], "rebind-user": ["rebind-user", "--email", "a@example.com"],
           "create-api-key": ["create-api-key", "--workspace", str(uuid.UUID(int=1)), "--scopes", "*"],
           "roll-account-key": ["roll-account-key"]}


class TestACommandNeverCreatesTheDatabaseOrTheKey:
    """Only serving creates the database and the secret key file (at the first start): a command run
    with the wrong configuration, or none, refuses instead of acting on a new, empty database."""

    @pytest.mark.parametrize("where", ["before", "after"])
    @pytest.mark.parametrize("command", ["serve", "check-config", "list-workspaces"])
    def test_a_configuration_file_that_is_not_there_is_refused_wherever_it_stands(self, tmp_path, command, where):
        result = run_placed(tmp_path, tmp_path / "absent.toml", where, command)
        assert (result.returncode, result.stderr) == (2, f"config error: config file not found: {tmp_path / 'absent.toml'}\n")
        assert files_under(tmp_path) == set()

    def test_a_configuration_given_twice_is_refused(self, tmp_path):
        result = run_placed(tmp_path, tmp_path / "a.toml", "before", "list-workspaces", "--config", str(tmp_path / "b.toml"))
        assert result.returncode == 2 and "--config is given twice" in result.stderr
        assert files_under(tmp_path) == set()

    @pytest.mark.parametrize("command", OPENING.keys())
    def test_a_database_that_does_not_exist_is_refused_and_not_created(self, tmp_path, command):
        config = tmp_path / "c.toml"
        config.write_text(f'[storage]\npath = "{tmp_path}/data/db.sqlite3"\nsecret_key_file = "{tmp_path}/data/secret.key"\n')
        result = run_placed(tmp_path, config, "before", *OPENING[command])
        assert result.returncode == 2
        assert result.stderr == (f"{command}: no database at {tmp_path}/data/db.sqlite3 (storage.path in {config}): a command "
                                 "acts on the service's existing database and never creates one; give --config the "
                                 "service's configuration file\n")
        assert files_under(tmp_path) == {"c.toml"}

    @pytest.mark.parametrize("command", OPENING.keys())
    def test_a_secret_key_file_that_does_not_exist_is_refused_and_not_created(self, tmp_path, migrated_sqlite, command):
        shutil.copy(migrated_sqlite, tmp_path / "db.sqlite3")
        config = tmp_path / "c.toml"
        config.write_text(f'[storage]\npath = "{tmp_path}/db.sqlite3"\nsecret_key_file = "{tmp_path}/secret.key"\n')
        result = run_placed(tmp_path, config, "after", *OPENING[command])
        assert result.returncode == 2
        assert result.stderr.startswith(f"{command}: no secret key file at {tmp_path}/secret.key (storage.secret_key_file "
                                        f"in {config}): a command never makes a new key")
        assert files_under(tmp_path) == {"c.toml", "db.sqlite3"}

    def test_without_a_configuration_the_embedded_defaults_database_is_not_created(self, tmp_path):
        result = subprocess.run([sys.executable, str(ROOT / "app.py"), "list-workspaces"], cwd=tmp_path, check=False,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2
        assert result.stderr.startswith(f"list-workspaces: no database at {tmp_path}/data/service.sqlite3 "
                                        "(storage.path its embedded default: no --config was given)")
        assert files_under(tmp_path) == set()

    def test_a_file_that_is_not_the_services_database_is_refused_and_left_as_it_was(self, tmp_path):
        other = sqlite3.connect(tmp_path / "other.sqlite3")
        other.execute("CREATE TABLE notes (body TEXT)")
        other.commit()
        other.close()
        before = (tmp_path / "other.sqlite3").read_bytes()
        config = tmp_path / "c.toml"
        config.write_text(f'[storage]\npath = "{tmp_path}/other.sqlite3"\nsecret_key_file = "{tmp_path}/secret.key"\n')
        result = run_placed(tmp_path, config, "after", "list-workspaces")
        assert result.returncode == 2
        assert result.stderr == f"list-workspaces: storage.path: cannot read {tmp_path}/other.sqlite3: no such table: schema_migrations\n"
        assert (tmp_path / "other.sqlite3").read_bytes() == before and files_under(tmp_path) == {"c.toml", "other.sqlite3"}
