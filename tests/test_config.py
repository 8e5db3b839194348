"""Configuration: defaults, the documented example, and one clear line for every mistake."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import attrs
import pytest

from core.config import Config, ConfigError, config_from_dict, load_config
from core.crypto import load_or_create_master_key

ROOT = Path(__file__).resolve().parent.parent


def all_fields(cls: type, prefix: str = "") -> dict[str, object]:
    """Every leaf key of a config class with its declared default (before derived values), dotted."""
    out: dict[str, object] = {}
    for field in attrs.fields(cls):
        value = field.default.factory() if isinstance(field.default, attrs.Factory) else field.default  # type: ignore[union-attr]
        if attrs.has(type(value)):
            out.update(all_fields(type(value), f"{prefix}{field.name}."))
        else:
            out[prefix + field.name] = value
    return out


def flatten(data: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


class TestExample:
    """config.example.toml documents every key with its default."""

    def test_the_example_sets_every_key_to_its_default(self):
        example = flatten(tomllib.loads((ROOT / "config.example.toml").read_text()))
        assert example == all_fields(Config)

    def test_the_example_loads_to_the_defaults(self):
        assert load_config(ROOT / "config.example.toml") == Config()

    def test_no_file_means_defaults(self):
        assert load_config(None) == Config()

    def test_the_contract_keys_exist(self):
        keys = set(all_fields(Config))
        for key in [
            "server.host", "server.port", "server.base_url", "server.portal_url", "server.trusted_proxies",
            "storage.path", "storage.url", "storage.secret_key_file", "oidc.issuer", "oidc.client_id", "oidc.client_secret",
            "oidc.redirect_uri", "dns.nameservers", "dns.timeout_seconds", "provider.kind",
            "provider.cloudflare.api_base", "provider.cloudflare.zone_id", "provider.cloudflare.api_token",
            "webhooks.poll_interval_seconds", "webhooks.max_attempts", "webhooks.request_timeout_seconds",
            "network.allow_private_ranges", "network.ca_bundle", "site_scan.port", "site_scan.timeout_seconds",
            "rate_limits.window_seconds", "rate_limits.api", "rate_limits.auth", "rate_limits.signup",
            "rate_limits.public_verification_links", "rate_limits.verification_links", "rate_limits.site_scan",
            "lifecycle.enabled", "lifecycle.interval_seconds", "lifecycle.max_interval_seconds", "lifecycle.pending_days",
            "lifecycle.active_check_seconds", "lifecycle.provider_share", "lifecycle.events",
            "domain_connect.provider_id", "domain_connect.service_id", "domain_connect.private_key_file",
            "domain_connect.key_host", "domain_connect.redirect_domain",
        ]:
            assert key in keys


class TestErrors:
    """Each mistake names the key."""

    @pytest.mark.parametrize(
        ("data", "message"),
        [
            ({"server": {"prot": 1}}, "unknown key server.prot (did you mean server.port?)"),
            ({"serverr": {}}, "unknown key serverr (did you mean server?)"),
            ({"provider": {"cloudflare": {"zone": "x"}}}, "unknown key provider.cloudflare.zone (did you mean provider.cloudflare.zone_id?)"),
            ({"webhooks": {"max_attempt": 3}}, "unknown key webhooks.max_attempt (did you mean webhooks.max_attempts?)"),
            ({"server": {"colour": "red"}}, "unknown key server.colour"),
            ({"server": {"port": "8080"}}, "server.port: Expected integer, received string"),
            ({"server": {"port": 70000}}, "server.port: must be 0 to 65535"),
            ({"server": "x"}, "server: expected a table"),
            ({"dns": {"nameservers": ["1.1.1.1:99999"]}}, "dns.nameservers:"),
            ({"dns": {"timeout_seconds": "3"}}, "dns.timeout_seconds: Expected number, received string"),
            ({"provider": {"kind": "aws"}}, 'provider.kind: must be "sandbox", "cloudflare" or "acme"'),
            ({"provider": {"new_workspace_share": 0}}, "provider.new_workspace_share: must be above 0 and at most 1"),
            ({"provider": {"calls_per_active_hostname": -1}}, "provider.calls_per_active_hostname: must be zero or more"),
            ({"server": {"trusted_proxies": ["proxy.local"]}}, "server.trusted_proxies:"),
            ({"network": {"allow_private_ranges": [10]}}, "network.allow_private_ranges.0:"),
            ({"webhooks": {"max_attempts": 0}}, "webhooks.max_attempts: must be positive"),
            ({"provider": {"acme": {"failed_validations_per_hour": 0}}},
             "provider.acme.failed_validations_per_hour: must be positive"),
            ({"provider": {"acme": {"profile": "short lived"}}}, "provider.acme.profile: must be empty or a profile name"),
            ({"provider": {"kind": "acme", "acme": {"directory_url": "https://acme.example/dir",
                                                    "fallback_directory_urls": ["https://other.example/dir"],
                                                    "fallback_profiles": ["shortlived", "classic"]}},
              "delegation_dns": {"zone": "acme.saas.example", "nameservers": ["ns1.saas.example"]}},
             "provider.acme.fallback_profiles: one profile per fallback_directory_urls entry"),
            ({"oidc": {"issuer": "https://idp.example"}}, "oidc.client_id: required"),
            ({"storage": {"url": "mysql://db/cps"}}, 'storage.url: must be empty (the SQLite file at path) or a "postgresql://" URL'),
            ({"domain_connect": {"simulate": True}},
             "domain_connect.simulate: only allowed with [provider.sandbox] simulate_dns = true"),
            ({"domain_connect": {"simulate": True}, "provider": {"kind": "cloudflare", "cloudflare": {
                "zone_id": "z", "api_token": "t"}}},
             "domain_connect.simulate: only allowed with [provider.sandbox] simulate_dns = true"),
            ({"domain_connect": {"simulate": True}, "provider": {"kind": "acme", "acme": {
                "directory_url": "https://acme.example/dir"}},
              "delegation_dns": {"zone": "acme.saas.example", "nameservers": ["ns1.saas.example"]}},
             "domain_connect.simulate: only allowed with [provider.sandbox] simulate_dns = true"),
            ({"domain_connect": {"simulate": True, "provider_id": "c.example.com", "service_id": "s",
                                 "private_key_file": "k", "key_host": "example.com"},
              "provider": {"sandbox": {"simulate_dns": True}}},
             "domain_connect.simulate: not with domain_connect.provider_id"),
            ({"rate_limits": {"api": True}}, "rate_limits.api: Expected integer, received boolean"),
            ({"provider": {"kind": "cloudflare"}}, "provider.cloudflare.zone_id: required"),
            ({"delegation_dns": {"tsig_secret": "not base64!"}}, "delegation_dns.tsig_secret: must be the key's secret in base64"),
            ({"delegation_dns": {"tsig_key_name": "a key"}}, "delegation_dns.tsig_key_name: must be a DNS name"),
            ({"provider": {"kind": "acme", "acme": {"directory_url": "https://acme.example/dir"}},
              "delegation_dns": {"zone": "acme.saas.example", "nameservers": ["ns1.saas.example", "NS2.acme.saas.example"]}},
             "delegation_dns.nameservers: NS2.acme.saas.example is inside the zone acme.saas.example"),
            ({"delegation_dns": {"secondaries": ["ns2.saas.example"]}},
             'delegation_dns.secondaries: must list "ip" or "ip:port" addresses'),
            ({"provider": {"kind": "acme", "acme": {"directory_url": "https://acme.example/dir"}},
              "delegation_dns": {"zone": "acme.saas.example", "nameservers": ["ns1.saas.example"],
                                 "secondaries": ["192.0.2.53"], "tsig_key_name": "cps-acme-transfer"}},
             "delegation_dns.tsig_secret: required when delegation_dns.secondaries is set"),
            ({"domain_connect": {"provider_id": "certs.example.com"}}, "domain_connect.service_id: required"),
            ({"domain_connect": {"provider_id": "certs example"}}, "domain_connect.provider_id: must be 1-63"),
            ({"domain_connect": {"key_label": "_dck1.x"}}, "domain_connect.key_label: must be one DNS label"),
            ({"domain_connect": {"provider_id": "c.example.com", "service_id": "s", "private_key_file": "k",
                                 "key_host": "example.com", "redirect_domain": "portal.example.com"}},
             "domain_connect.redirect_domain: must be the host of server.portal_url (127.0.0.1)"),
        ],
    )
    def test_message_names_the_key(self, data, message):
        with pytest.raises(ConfigError) as info:
            config_from_dict(data)
        assert str(info.value).startswith(message)

    def test_a_missing_file_is_named(self, tmp_path):
        with pytest.raises(ConfigError, match="config file not found: .*nope.toml"):
            load_config(tmp_path / "nope.toml")

    def test_invalid_toml_is_named(self, tmp_path):
        path = tmp_path / "bad.toml"
        path.write_text("[server\n")
        with pytest.raises(ConfigError, match="bad.toml is not valid TOML"):
            load_config(path)


class TestTrafficKeys:
    """[tls_terminator] traffic_cname and traffic_addresses: where customers point the hostname itself."""

    def test_a_cname_target_and_addresses_are_read(self):
        terminator = config_from_dict({"tls_terminator": {
            "traffic_cname": "edge.saas.example", "traffic_addresses": ["192.0.2.10", "2001:db8::10"]}}).tls_terminator
        assert (terminator.traffic_cname, terminator.traffic_addresses) == ("edge.saas.example", ["192.0.2.10", "2001:db8::10"])

    def test_a_cname_target_that_is_not_a_hostname_is_refused_naming_the_key(self):
        with pytest.raises(ConfigError) as info:
            config_from_dict({"tls_terminator": {"traffic_cname": "https://edge.saas.example/"}})
        assert str(info.value).startswith('tls_terminator.traffic_cname: must be a hostname such as "edge.saas.example"')

    def test_an_address_as_cname_target_is_refused_naming_the_key(self):
        with pytest.raises(ConfigError, match=r"^tls_terminator\.traffic_cname: .*is an IP address"):
            config_from_dict({"tls_terminator": {"traffic_cname": "192.0.2.10"}})

    def test_a_bad_address_is_refused_naming_the_key_and_the_value(self):
        with pytest.raises(ConfigError) as info:
            config_from_dict({"tls_terminator": {"traffic_addresses": ["192.0.2.10", "192.0.2.300"]}})
        assert str(info.value) == "tls_terminator.traffic_addresses: '192.0.2.300' is not an IPv4 or IPv6 address"

    def test_an_address_no_visitor_can_reach_is_refused(self):
        with pytest.raises(ConfigError, match=r"^tls_terminator\.traffic_addresses: 0\.0\.0\.0 cannot receive"):
            config_from_dict({"tls_terminator": {"traffic_addresses": ["0.0.0.0"]}})


class TestStartUp:
    """python app.py --config FILE as an operator runs it."""

    def run_app(self, *args: str, cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(ROOT / "app.py"), *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
        )

    def test_an_unknown_key_stops_start_up_with_one_line(self, tmp_path):
        path = tmp_path / "c.toml"
        path.write_text("[server]\nport = 8080\nflavour = 'x'\n")
        result = self.run_app("--config", str(path), cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == ["config error: unknown key server.flavour"]

    def test_a_missing_file_stops_start_up_with_one_line(self, tmp_path):
        result = self.run_app("--config", "missing.toml", cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.strip() == "config error: config file not found: missing.toml"
        assert "Traceback" not in result.stderr

    def test_a_wrong_type_stops_start_up_with_one_line(self, tmp_path):
        path = tmp_path / "c.toml"
        path.write_text('[rate_limits]\napi = "lots"\n')
        result = self.run_app("--config", str(path), cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.strip() == "config error: rate_limits.api: Expected integer, received string"


class TestDerivedAddresses:
    """base_url and portal_url follow host and port unless set (review finding 14)."""

    def test_setting_only_the_port_moves_both_urls(self):
        config = config_from_dict({"server": {"port": 9090}})
        assert (config.server.base_url, config.server.portal_url) == ("http://127.0.0.1:9090", "http://127.0.0.1:9090")

    def test_an_explicit_base_url_is_kept_and_the_portal_follows_it(self):
        config = config_from_dict({"server": {"base_url": "https://certs.example.com"}, "oidc": {"issuer": "https://idp.example.com", "client_id": "x"}})
        assert config.server.portal_url == "https://certs.example.com"

    def test_the_defaults_are_the_documented_ones(self):
        assert Config().server.base_url == "http://127.0.0.1:8080"

    def test_with_port_0_the_derived_urls_name_the_port_bound(self):
        config = config_from_dict({"server": {"port": 0}}).bound_to(45123)
        assert (config.server.base_url, config.server.portal_url, config.redirect_uri) == (
            "http://127.0.0.1:45123", "http://127.0.0.1:45123", "http://127.0.0.1:45123/auth/callback")

    def test_with_port_0_urls_set_in_the_file_are_kept(self):
        config = config_from_dict({"server": {"port": 0, "base_url": "http://localhost:9000"}}).bound_to(45123)
        assert (config.server.base_url, config.server.portal_url) == ("http://localhost:9000", "http://localhost:9000")


class TestSecretKeyFile:
    """storage.secret_key_file."""

    def test_created_with_mode_0600_on_first_start(self, tmp_path):
        path = tmp_path / "nested" / "secret.key"
        key = load_or_create_master_key(path)
        assert len(key) == 32
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600

    def test_kept_across_starts(self, tmp_path):
        path = tmp_path / "secret.key"
        assert load_or_create_master_key(path) == load_or_create_master_key(path)


class TestServe:
    """The service starts, answers and stops cleanly."""

    def start(self, args: list[str], cwd: Path) -> tuple[subprocess.Popen, int]:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "app.py"), *args], cwd=cwd, stderr=subprocess.PIPE, text=True
        )
        for line in proc.stderr:
            match = re.search(r"listening on http://[\d.]+:(\d+)", line)
            if match:
                return proc, int(match.group(1))
        raise AssertionError(f"the service did not start (exit {proc.wait()})")

    def stop(self, proc: subprocess.Popen) -> int:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(10)
        proc.stderr.close()
        return code

    def test_starts_from_a_config_file_and_stops_on_sigterm(self, tmp_path):
        path = tmp_path / "c.toml"
        path.write_text('[server]\nport = 0\n[storage]\npath = "db/x.sqlite3"\nsecret_key_file = "db/k"\n')
        proc, port = self.start(["--config", str(path)], tmp_path)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/openapi.json") as response:
                assert json.load(response)["openapi"].startswith("3.1")
        finally:
            assert self.stop(proc) == 0
        assert (tmp_path / "db" / "x.sqlite3").exists() and (tmp_path / "db" / "k").exists()

    def test_a_port_in_use_is_one_line_and_exit_2(self, tmp_path):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            path = tmp_path / "c.toml"
            path.write_text(f'[server]\nport = {port}\n[storage]\npath = "x.sqlite3"\nsecret_key_file = "k"\n')
            result = subprocess.run([sys.executable, str(ROOT / "app.py"), "--config", str(path)], cwd=tmp_path,
                                    capture_output=True, text=True, timeout=30, check=False)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        errors = [line for line in result.stderr.splitlines() if " INFO " not in line and " WARNING " not in line]
        assert errors == [f"start-up error: server.port: 127.0.0.1:{port} is already in use; stop the other program or choose another port"]

    def test_the_tls_terminator_listen_address_in_use_is_one_line_and_exit_2(self, tmp_path):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            path = tmp_path / "c.toml"
            path.write_text(f'[server]\nport = 0\n[storage]\npath = "x.sqlite3"\nsecret_key_file = "k"\n'
                            f'[tls_terminator]\nlisten = "127.0.0.1:{port}"\nsecret = "s3cret"\n')
            result = subprocess.run([sys.executable, str(ROOT / "app.py"), "--config", str(path)], cwd=tmp_path,
                                    capture_output=True, text=True, timeout=30, check=False)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        errors = [line for line in result.stderr.splitlines() if " INFO " not in line and " WARNING " not in line]
        assert errors == [f"start-up error: tls_terminator.listen: 127.0.0.1:{port} is already in use; stop the other program or choose another port"]

    def test_without_a_secret_the_tls_terminator_endpoints_do_not_listen(self, tmp_path):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()  # were the endpoints on, this address in use would stop start-up
            port = taken.getsockname()[1]
            path = tmp_path / "c.toml"
            path.write_text(f'[server]\nport = 0\n[storage]\npath = "x.sqlite3"\nsecret_key_file = "k"\n'
                            f'[tls_terminator]\nlisten = "127.0.0.1:{port}"\n')
            proc, _ = self.start(["--config", str(path)], tmp_path)
            assert self.stop(proc) == 0

    def test_version(self, tmp_path):
        result = subprocess.run([sys.executable, str(ROOT / "app.py"), "--version"], cwd=tmp_path,
                                capture_output=True, text=True, timeout=30, check=False)
        assert result.returncode == 0 and re.fullmatch(r"app\.py \S+\n", result.stdout)

    def test_the_log_names_the_configuration_and_the_database(self, tmp_path):
        path = tmp_path / "c.toml"
        path.write_text('[server]\nport = 0\n[storage]\npath = "db/x.sqlite3"\nsecret_key_file = "db/k"\n')
        proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--config", str(path)], cwd=tmp_path,
                                stderr=subprocess.PIPE, text=True)
        try:
            first = proc.stderr.readline()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
            proc.stderr.close()
        assert f"configuration {path}" in first and str(tmp_path / "db" / "x.sqlite3") in first

    def test_starts_on_embedded_defaults(self, tmp_path):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", 8080)) == 0:
                pytest.skip("port 8080 is taken on this machine")
        proc, port = self.start([], tmp_path)
        try:
            assert port == 8080
            with urllib.request.urlopen("http://127.0.0.1:8080/v1/auth/session") as response:
                assert json.load(response) is None
        finally:
            assert self.stop(proc) == 0
        assert (tmp_path / "data" / "service.sqlite3").exists()

    def test_with_port_0_sign_in_goes_to_the_port_the_os_picked(self, tmp_path):
        path = tmp_path / "c.toml"
        path.write_text('[server]\nport = 0\n[storage]\npath = "x.sqlite3"\nsecret_key_file = "k"\n')
        proc, port = self.start(["--config", str(path)], tmp_path)

        class Stay(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        try:
            with pytest.raises(urllib.error.HTTPError) as redirected:
                urllib.request.build_opener(Stay).open(f"http://127.0.0.1:{port}/login", timeout=10)
            with redirected.value:
                assert redirected.value.code == 302
                location = redirected.value.headers["Location"]
            assert location.startswith(f"http://127.0.0.1:{port}/idp/authorize?")
            assert f"redirect_uri=http%3A%2F%2F127.0.0.1%3A{port}%2Fauth%2Fcallback" in location
            with urllib.request.urlopen(location, timeout=10) as form:  # the provider's sign-in form
                assert form.status == 200
        finally:
            assert self.stop(proc) == 0

    def test_with_port_0_the_built_in_issuer_names_the_port_the_os_picked(self, tmp_path):
        path = tmp_path / "c.toml"
        path.write_text('[server]\nport = 0\n[storage]\npath = "x.sqlite3"\nsecret_key_file = "k"\n')
        proc, port = self.start(["--config", str(path)], tmp_path)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/idp/.well-known/openid-configuration") as response:
                assert json.load(response)["issuer"] == f"http://127.0.0.1:{port}/idp"
        finally:
            assert self.stop(proc) == 0
