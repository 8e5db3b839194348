"""The operator's side of one-click set-up, run as an operator runs it:
``python app.py domain-connect-template`` and ``python app.py check-config`` with a ``[domain_connect]``
table, against the test DNS server publishing (or not) the public key."""

from __future__ import annotations

import json
import os

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from core.domain_connect.signing import public_key_records
from tests.servers.service import run_app as run

KEY_NAME = "_dck1.keys.operator-test.com"


@pytest.fixture(scope="module")
def signing_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def write_key(path, key):
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    os.chmod(path, 0o600)
    return path


@pytest.fixture
def config_file(tmp_path, dns, signing_key):
    path = tmp_path / "service.toml"
    path.write_text(
        f'[storage]\npath = "{tmp_path / "db.sqlite3"}"\nsecret_key_file = "{tmp_path / "secret.key"}"\n'
        f'[dns]\nnameservers = ["{dns.address}"]\ntimeout_seconds = 0.5\n'
        f'[domain_connect]\nprovider_id = "operator-test.com"\nservice_id = "tls-hostname"\n'
        f'private_key_file = "{write_key(tmp_path / "dc.pem", signing_key)}"\nkey_host = "keys.operator-test.com"\n'
    )
    return path


def printed_records(stdout: str) -> list[str]:
    return [line.split(" IN TXT ", 1)[1].strip('"') for line in stdout.splitlines() if " IN TXT " in line]


class TestTemplate:
    def test_the_template_is_printed_as_json_with_both_records_and_the_signing_settings(self, config_file, tmp_path):
        result = run(config_file, "domain-connect-template")
        assert result.returncode == 0, result.stderr
        body = result.stdout.split("\n", 1)[1].split("\n\n#", 1)[0]
        printed = json.loads(body)
        assert (printed["providerId"], printed["serviceId"], printed["syncPubKeyDomain"], printed["syncRedirectDomain"]) == (
            "operator-test.com", "tls-hostname", "keys.operator-test.com", "127.0.0.1")
        assert [(r["type"], r["host"]) for r in printed["records"]] == [("CNAME", "_acme-challenge"),
                                                                       ("TXT", "_service-verify")]
        assert "warnPhishing" not in printed
        assert sorted(p.name for p in tmp_path.iterdir()) == ["dc.pem", "service.toml"]  # wrote nothing

    def test_a_loopback_portal_is_warned_about_after_the_template(self, config_file):
        result = run(config_file, "domain-connect-template")
        assert "\n\n# WARNING: syncRedirectDomain is 127.0.0.1, which is not a public name" in result.stdout

    def test_a_public_portal_gets_no_warning(self, config_file):
        with config_file.open("a") as out:
            out.write('[server]\nportal_url = "https://portal.operator-test.com"\n'
                      '[oidc]\nissuer = "https://id.operator-test.com"\nclient_id = "cps"\n')
        result = run(config_file, "domain-connect-template")
        assert result.returncode == 0, result.stderr
        assert '"syncRedirectDomain": "portal.operator-test.com"' in result.stdout and "WARNING" not in result.stdout

    def test_the_public_key_is_printed_as_txt_records_at_the_key_name(self, config_file):
        result = run(config_file, "domain-connect-template")
        lines = [line for line in result.stdout.splitlines() if " IN TXT " in line]
        assert len(lines) == 2 and all(line.startswith(KEY_NAME + ". 300 IN TXT ") for line in lines)
        assert all(len(value) <= 255 and value.startswith(f"p={n},a=RS256,d=")
                   for n, value in enumerate(printed_records(result.stdout), start=1))

    def test_without_a_domain_connect_table_it_says_what_to_set(self, tmp_path):
        config = tmp_path / "plain.toml"
        config.write_text(f'[storage]\npath = "{tmp_path / "db.sqlite3"}"\nsecret_key_file = "{tmp_path / "k"}"\n')
        result = run(config, "domain-connect-template")
        assert result.returncode == 2 and "set [domain_connect] provider_id" in result.stderr


class TestCheckConfig:
    def test_a_published_key_matching_the_private_key_is_confirmed(self, config_file, dns):
        dns.publish(KEY_NAME, "TXT", *printed_records(run(config_file, "domain-connect-template").stdout))
        result = run(config_file, "check-config")
        assert result.returncode == 0, result.stderr
        assert f"public key at {KEY_NAME} matches the private key" in result.stdout

    def test_a_key_not_yet_published_is_said_so(self, config_file):
        result = run(config_file, "check-config")
        assert result.returncode == 0, result.stderr
        assert "not published yet" in result.stdout and "domain-connect-template" in result.stdout

    def test_another_published_key_is_refused_in_one_line(self, config_file, dns):
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        dns.publish(KEY_NAME, "TXT", *public_key_records(other.public_key()))
        result = run(config_file, "check-config")
        assert result.returncode == 2 and result.stderr.count("\n") == 1
        assert f"the public key published at {KEY_NAME} is not this key's" in result.stderr

    def test_a_key_file_others_may_read_is_refused_as_at_start_up(self, config_file, tmp_path):
        os.chmod(tmp_path / "dc.pem", 0o644)
        result = run(config_file, "check-config")
        assert result.returncode == 2 and "chmod 600" in result.stderr


def test_check_config_says_a_simulated_set_up_is_simulated(tmp_path):
    path = tmp_path / "service.toml"
    path.write_text(f'[storage]\npath = "{tmp_path / "db.sqlite3"}"\nsecret_key_file = "{tmp_path / "secret.key"}"\n'
                    "[provider.sandbox]\nsimulate_dns = true\n[domain_connect]\nsimulate = true\n")
    result = run(path, "check-config")
    assert result.returncode == 0, result.stderr
    assert ("one-click DNS set-up SIMULATED: a stand-in DNS host at http://127.0.0.1:8080/simulated-dns-host"
            in result.stdout), result.stdout
