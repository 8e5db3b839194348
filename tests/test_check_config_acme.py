"""``check-config`` and the start-up log in ACME mode (issue 48, item 4), against a real Pebble
(tests/servers/pebble.py) on loopback: each CA's directory fetched with ``[provider.acme]
ca_bundle``, named (staging, production, a test CA), our account there read from the database
when one exists (never created), External Account Binding said without its key; the TLS
terminator's listener, secret (never printed) and ``files_dir`` (owner, group, mode); and every
port the service listens on bound, one held by a test socket said with its key.

A CA that does not answer is a warning, not a refusal (core/runtime/acme_setup.py says why); a
``ca_bundle`` that cannot be loaded is refused.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
from pathlib import Path

import attrs
import pytest

from core.config import AcmeConfig, DelegationDnsConfig, ProviderConfig, StorageConfig, TlsTerminatorConfig
from core.runtime import acme_setup, commands
from core.runtime.assembly import build_services
from store import Store
from store.acme import AcmeAccount
from tests.servers.pebble import Directory, Pebble, missing
from tests.servers.service import free_port
from tests.servers.service import run_app as run

needs_pebble = pytest.mark.skipif(missing() is not None, reason=missing() or "")
SECRET = "terminator-secret-never-printed-0123456789"
HMAC_KEY = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"


@pytest.fixture(scope="module")
def pebble(tmp_path_factory):
    """Pebble answering its directory (no order is placed here: its DNS server is never asked)."""
    running = Pebble(tmp_path_factory.mktemp("pebble"), dns_server="127.0.0.1:9").start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def pebble_with_eab(tmp_path_factory, pebble):
    running = Pebble(tmp_path_factory.mktemp("pebble-eab"), dns_server="127.0.0.1:9", eab={"kid-1": HMAC_KEY},
                     ca=pebble.ca).start()
    yield running
    running.stop()


def acme(config, directory_url: str, *, ca_bundle: str = "", terminator: TlsTerminatorConfig | None = None, **settings):
    """The test's configuration in ACME mode, every port free unless a test holds one."""
    return attrs.evolve(
        config,
        server=attrs.evolve(config.server, port=free_port()),
        provider=ProviderConfig(kind="acme", acme=AcmeConfig(directory_url=directory_url, ca_bundle=ca_bundle,
                                                             contact_email="ops@saas.test", timeout_seconds=5,
                                                             **settings)),
        delegation_dns=DelegationDnsConfig(zone="acme.saas.test", nameservers=["ns1.saas.test"],
                                           listen=f"127.0.0.1:{free_port()}"),
        tls_terminator=terminator or TlsTerminatorConfig(listen=f"127.0.0.1:{free_port()}", secret=SECRET),
    )


def on_pebble(config, pebble: Pebble, **settings):
    return acme(config, pebble.directory_url, ca_bundle=str(pebble.ca_bundle), **settings)


def closed_url() -> str:
    """An HTTPS URL where nothing listens."""
    return f"https://127.0.0.1:{free_port()}/dir"


def the_line(lines: list[str], start: str) -> str:
    [line] = [line for line in lines if line.startswith(start)]
    return line


class TestTheCertificateAuthority:
    @needs_pebble
    def test_the_ca_reached_with_its_bundle_says_its_directory_answered(self, config, pebble):
        lines = commands.check_config(on_pebble(config, pebble))
        assert lines[0] == "configuration OK"
        line = the_line(lines, f"  certificate authority {pebble.directory_url}: ")
        assert f"its directory answered (HTTPS trusted by [provider.acme] ca_bundle {pebble.ca_bundle})" in line
        assert "WARNING" not in line

    @needs_pebble
    def test_a_ca_whose_https_the_bundle_does_not_trust_is_a_warning_naming_the_trust(self, config, pebble):
        lines = commands.check_config(acme(config, pebble.directory_url))  # no ca_bundle: the system's CAs
        line = the_line(lines, f"  certificate authority {pebble.directory_url}: ")
        assert "WARNING: its HTTPS certificate is not trusted by the system's CAs" in line

    def test_a_ca_that_cannot_be_reached_is_a_warning_and_the_command_succeeds(self, config):
        url = closed_url()
        line = the_line(commands.check_config(acme(config, url)), f"  certificate authority {url}: ")
        assert "WARNING: cannot be reached" in line and "The service still starts" in line

    def test_a_ca_that_cannot_be_reached_exits_0_from_the_command_line(self, tmp_path):
        path = tmp_path / "acme.toml"
        path.write_text(
            f'[server]\nport = {free_port()}\n[storage]\npath = "{tmp_path}/service.sqlite3"\n'
            f'secret_key_file = "{tmp_path}/secret.key"\n[provider]\nkind = "acme"\n[provider.acme]\n'
            f'directory_url = "{closed_url()}"\ntimeout_seconds = 2\n[delegation_dns]\nzone = "acme.saas.test"\n'
            f'nameservers = ["ns1.saas.test"]\nlisten = "127.0.0.1:{free_port()}"\n[dns]\n'
            'nameservers = ["127.0.0.1:9"]\ntimeout_seconds = 0.5\n')
        result = run(path, "check-config")
        assert result.returncode == 0, result.stderr
        assert "WARNING: cannot be reached" in result.stdout

    def test_a_ca_bundle_that_cannot_be_loaded_is_refused_naming_the_key(self, config, tmp_path):
        absent = tmp_path / "absent.pem"
        with pytest.raises(commands.CommandError, match=rf"provider\.acme\.ca_bundle: cannot load {absent}"):
            commands.check_config(acme(config, closed_url(), ca_bundle=str(absent)))

    @needs_pebble
    def test_each_fallback_ca_is_reached_and_named(self, config, pebble):
        url = closed_url()
        lines = commands.check_config(on_pebble(config, pebble, fallback_directory_urls=[url]))
        line = the_line(lines, f"  fallback certificate authority 1 {url}: ")
        assert "WARNING: cannot be reached" in line


class TestProfiles:
    """Issue 50: the profiles each CA's directory offers (``meta.profiles``), and the one configured."""

    @pytest.fixture
    def offering(self, pebble):
        """Pebble behind its front, whose directory lists two profiles (Pebble 2.4 lists none)."""
        front = Directory(pebble, profiles={"classic": "The usual", "shortlived": "Six days"}).start()
        yield front
        front.stop()

    def on_front(self, config, pebble, front, **settings):
        return acme(config, front.directory_url, ca_bundle=str(pebble.ca_bundle), **settings)

    @needs_pebble
    def test_the_profiles_a_ca_offers_are_listed_with_their_descriptions(self, config, pebble, offering):
        lines = commands.check_config(self.on_front(config, pebble, offering))
        assert '    profiles offered: "classic" (The usual); "shortlived" (Six days)' in lines

    @needs_pebble
    def test_a_ca_offering_none_says_so(self, config, pebble):
        lines = commands.check_config(on_pebble(config, pebble))
        assert the_line(lines, "    profiles offered: ").startswith("    profiles offered: none")

    @needs_pebble
    def test_an_offered_profile_is_said_to_be_named_in_orders(self, config, pebble, offering):
        lines = commands.check_config(self.on_front(config, pebble, offering, profile="shortlived"))
        assert '    profile "shortlived": offered; orders there name it' in lines

    @needs_pebble
    def test_a_profile_not_offered_is_a_warning_saying_the_default_is_ordered(self, config, pebble):
        lines = commands.check_config(on_pebble(config, pebble, profile="shortlived"))
        line = the_line(lines, "    WARNING: ")
        assert f'{pebble.directory_url} does not offer the profile "shortlived"' in line
        assert "Orders there are for its default profile" in line

    @needs_pebble
    def test_a_required_profile_not_offered_is_a_warning_saying_no_order_goes(self, config, pebble):
        lines = commands.check_config(on_pebble(config, pebble, profile="shortlived", profile_required=True))
        assert "profile_required is true: no order goes to it" in the_line(lines, "    WARNING: ")


class TestCaNames:
    @pytest.mark.parametrize(("url", "named"), [
        ("https://acme-v02.api.letsencrypt.org/directory", "Let's Encrypt production"),
        ("https://acme-staging-v02.api.letsencrypt.org/directory", "Let's Encrypt staging, a test CA"),
        ("https://pebble.internal:14000/dir", "a test CA, as its URL says"),
        ("https://dv.acme-v02.test-api.pki.goog/directory", "a test CA, as its URL says"),
        ("https://acme.zerossl.com/v2/DV90", "the CA at acme.zerossl.com"),
        ("https://127.0.0.1:14000/dir", "the CA at 127.0.0.1:14000"),
    ])
    def test_the_ca_is_named_by_its_directory_url(self, url, named):
        assert acme_setup.ca_name(url).startswith(named)

    def test_production_is_not_called_a_test_ca(self):
        assert "test" not in acme_setup.ca_name("https://acme-v02.api.letsencrypt.org/directory")


class TestTheAccount:
    @needs_pebble
    def test_without_a_database_the_account_is_registered_at_the_first_order_and_nothing_is_created(
            self, config, pebble, tmp_path):
        fresh = tmp_path / "fresh"
        config = attrs.evolve(on_pebble(config, pebble), storage=StorageConfig(
            path=str(fresh / "service.sqlite3"), secret_key_file=str(fresh / "secret.key")))
        lines = commands.check_config(config)
        assert "    no account yet (the database does not exist yet): registered at the first order" in lines
        assert not fresh.exists()

    @needs_pebble
    def test_a_database_without_an_account_says_it_is_registered_at_the_first_order(self, config, pebble):
        assert "    no account yet: registered at the first order" in commands.check_config(on_pebble(config, pebble))

    @needs_pebble
    def test_an_account_kept_in_the_database_is_named_and_the_database_is_not_written(self, config, pebble, clock):
        config = on_pebble(config, pebble)
        build_services(config, clock=clock).close()
        store = Store(config.storage.path)
        with store.transaction():
            store.acme.add_account(AcmeAccount(directory_url=pebble.directory_url, account_url="https://ca.test/acct/7",
                                               key_ciphertext="sealed", created_at=clock.now()))
        store.close()
        before = Path(config.storage.path).stat().st_mtime_ns
        lines = commands.check_config(config)
        assert "    account registered already: https://ca.test/acct/7" in lines
        assert Path(config.storage.path).stat().st_mtime_ns == before

    @needs_pebble
    def test_the_contact_and_eab_are_said_without_the_hmac_key(self, config, pebble_with_eab):
        config = on_pebble(config, pebble_with_eab, eab_kid="kid-1", eab_hmac_key=HMAC_KEY)
        lines = commands.check_config(config)
        assert "  ACME contact ops@saas.test; External Account Binding key id kid-1, its HMAC key set (not shown)" in lines
        assert HMAC_KEY not in "\n".join(lines)
        assert not any("requires External Account Binding" in line for line in lines)

    @needs_pebble
    def test_a_ca_requiring_eab_without_it_configured_is_a_warning(self, config, pebble_with_eab):
        lines = commands.check_config(on_pebble(config, pebble_with_eab))
        assert "  ACME contact ops@saas.test; External Account Binding none" in lines
        assert any(line.startswith("    WARNING: the CA requires External Account Binding") for line in lines)


class TestTheTerminator:
    def test_its_endpoints_and_secret_are_said_and_the_secret_never_printed(self, config):
        config = acme(config, closed_url())
        lines = commands.check_config(config)
        listen = config.tls_terminator.listen
        assert (f"  TLS terminator endpoints (Caddy's get_certificate, ask and permission) on http://{listen}/caddy/, "
                "with a secret (not shown)") in lines
        assert SECRET not in "\n".join(lines)

    def test_an_empty_secret_is_a_warning_saying_what_is_off(self, config):
        lines = commands.check_config(acme(config, closed_url(), terminator=TlsTerminatorConfig(secret="")))
        line = the_line(lines, "  WARNING: [tls_terminator] secret is empty")
        assert "Caddy cannot serve the certificates issued" in line and "no files_dir is set either" in line

    def test_a_missing_files_dir_is_a_warning_with_the_command_that_makes_it(self, config, tmp_path):
        folder = tmp_path / "tls"
        terminator = TlsTerminatorConfig(secret="", files_dir=str(folder))
        line = the_line(commands.check_config(acme(config, closed_url(), terminator=terminator)), "  TLS terminator files")
        assert "WARNING: it does not exist" in line and f"-m 2750 {folder}" in line
        assert not folder.exists()

    def test_a_files_dir_made_as_documented_is_said_with_its_owner_group_and_mode(self, config, tmp_path):
        folder = tmp_path / "tls"
        folder.mkdir()
        os.chmod(folder, 0o2750)
        terminator = TlsTerminatorConfig(secret="", files_dir=str(folder))
        line = the_line(commands.check_config(acme(config, closed_url(), terminator=terminator)), "  TLS terminator files")
        owner, group = acme_setup._user(os.getuid()), acme_setup._group(os.getgid())
        assert line == (f"  TLS terminator files (nginx) in {folder}: owner {owner}, group {group}, mode 2750; "
                        "as it should be")

    @pytest.mark.parametrize(("mode", "said"), [
        (0o0755, "others may use it"),
        (0o2700, "its group cannot list and enter it"),
        (0o0750, "no setgid bit"),
    ])
    def test_a_files_dir_whose_mode_keeps_the_keys_from_the_terminator_or_opens_them_is_a_warning(
            self, config, tmp_path, mode, said):
        folder = tmp_path / "tls"
        folder.mkdir()
        os.chmod(folder, mode)
        terminator = TlsTerminatorConfig(secret="", files_dir=str(folder))
        line = the_line(commands.check_config(acme(config, closed_url(), terminator=terminator)), "  TLS terminator files")
        assert f"mode {stat.S_IMODE(folder.stat().st_mode):04o}; WARNING: " in line and said in line


def held(address: str) -> socket.socket:
    """A test socket listening on ``address`` ("ip:port"), as another program would."""
    host, port = address.rsplit(":", 1)
    sock = socket.socket()
    sock.bind((host, int(port)))
    sock.listen()
    return sock


class TestPortsInUse:
    def test_a_server_port_held_by_another_socket_is_a_warning_naming_server_port(self, config):
        config = attrs.evolve(config, server=attrs.evolve(config.server, port=free_port()))
        with held(f"{config.server.host}:{config.server.port}"):
            lines = commands.check_config(config)
        assert lines[0] == "configuration OK"
        line = the_line(lines, "  WARNING: server.port: ")
        assert f"{config.server.host}:{config.server.port} is in use by another program" in line

    def test_a_free_server_port_says_nothing_more(self, config):
        config = attrs.evolve(config, server=attrs.evolve(config.server, port=free_port()))
        assert not any("is in use" in line for line in commands.check_config(config))

    def test_the_terminators_listener_held_by_another_socket_is_a_warning_naming_its_key(self, config):
        config = acme(config, closed_url())
        with held(config.tls_terminator.listen):
            lines = commands.check_config(config)
        assert the_line(lines, "  WARNING: tls_terminator.listen: ").startswith(
            f"  WARNING: tls_terminator.listen: {config.tls_terminator.listen} is in use")

    def test_the_delegation_zones_listener_held_by_another_program_is_refused_naming_its_key(self, config):
        config = acme(config, closed_url())
        with held(config.delegation_dns.listen), pytest.raises(commands.CommandError,
                                                               match=r"delegation_dns\.listen: .* already in use"):
            commands.check_config(config)

    def test_the_command_line_exits_0_with_the_warning(self, tmp_path):
        port = free_port()
        path = tmp_path / "held.toml"
        path.write_text(f'[server]\nport = {port}\n[storage]\npath = "{tmp_path}/service.sqlite3"\n'
                        f'secret_key_file = "{tmp_path}/secret.key"\n')
        with held(f"127.0.0.1:{port}"):
            result = run(path, "check-config")
        assert result.returncode == 0, result.stderr
        assert f"WARNING: server.port: 127.0.0.1:{port} is in use" in result.stdout


class TestStartUpLog:
    @needs_pebble
    @pytest.mark.gen_test
    async def test_a_serving_process_logs_the_ca_reached_the_account_and_the_terminator(self, pebble, config, clock,
                                                                                        caplog):
        config = on_pebble(config, pebble)
        services = build_services(config, clock=clock)
        try:
            with caplog.at_level(logging.INFO, logger="core.runtime.acme_setup"):
                await acme_setup.log_at_start(services)
        finally:
            services.close()
        said = [record.getMessage() for record in caplog.records]
        assert any(f"ACME: certificate authority {pebble.directory_url}: " in line and "its directory answered" in line
                   for line in said)
        assert "ACME: no account yet: registered at the first order" in said
        assert SECRET not in caplog.text

    @pytest.mark.gen_test
    async def test_a_ca_that_cannot_be_reached_is_a_logged_warning(self, config, clock, caplog):
        url = closed_url()
        services = build_services(acme(config, url), clock=clock)
        try:
            with caplog.at_level(logging.INFO, logger="core.runtime.acme_setup"):
                await acme_setup.log_at_start(services)
        finally:
            services.close()
        [warning] = [r for r in caplog.records if r.levelno == logging.WARNING and url in r.getMessage()]
        assert "cannot be reached" in warning.getMessage()
