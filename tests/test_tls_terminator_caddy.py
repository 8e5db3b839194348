"""Caddy serving customers' hostnames with the service's certificates: Debian's Caddy (2.6.2, which
has ``get_certificate http``) running deploy/Caddyfile.customers as it is, only its ``{$...}``
placeholders filled, in front of ``python app.py`` with ``[tls_terminator]`` on. A real TLS
handshake with the customer's hostname as SNI gets the certificate the ACME client stored (here
written to the service's database by the test, as a second process would); a name without one
fails the handshake, and Caddy does not go on to obtain a certificate itself.

Every test runs twice: with the 2.6 form (on-demand ``ask``) and the 2.8 form
(deploy/Caddyfile.customers-2.8: ``permission http``, which Caddy 2.8 has in place of the
deprecated ``ask``). The 2.8 form needs a Caddy 2.8 or newer (``CPS_TEST_NEWER_CADDY``,
tests/servers/terminators.py), and is skipped without one; Debian's Caddy refuses it.
"""

from __future__ import annotations

import ssl
import subprocess
import time
from typing import NamedTuple

import pytest
import trustme

from core.crypto import Keyring, load_or_create_master_key
from store import Store
from tests.servers.caddy import CADDY, fetch
from tests.servers.service import ServiceProcess, free_port
from tests.servers.terminators import (
    CADDYFILE,
    CADDYFILE_2_8,
    NEWER_CADDY,
    SECRET,
    CustomersCaddy,
    Issued,
    issue,
    presented,
)

pytestmark = pytest.mark.skipif(CADDY is None, reason="caddy is not installed (apt-get install caddy)")
HOST = "shop.customer.test"


class Stack(NamedTuple):
    service: ServiceProcess
    caddy: CustomersCaddy
    issued: Issued
    "The certificate stored before the service started."
    store: Store
    "The service's database, opened by the test as the ACME client's process would."
    keyring: Keyring


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


#: The two forms of the file, each with the Caddy that runs it (None: none here; skipped).
FORMS = {"ask (Caddy 2.6)": (CADDYFILE, CADDY), "permission http (Caddy 2.8+)": (CADDYFILE_2_8, NEWER_CADDY)}


@pytest.fixture(scope="module", params=list(FORMS))
def stack(tmp_path_factory, ca, request):
    caddyfile, binary = FORMS[request.param]
    if binary is None:
        pytest.skip("needs a Caddy 2.8 or newer: set CPS_TEST_NEWER_CADDY (tests/servers/terminators.py)")
    folder = tmp_path_factory.mktemp("caddy-customers")
    terminator = free_port()
    service = ServiceProcess(folder, dns_address="127.0.0.1:9", extra=(
        f'[tls_terminator]\nlisten = "127.0.0.1:{terminator}"\nsecret = "{SECRET}"\n'
        "[lifecycle]\nenabled = false\n[logging]\nlevel = \"debug\"\n"
    ))
    # The ACME client's side: a certificate stored in the service's database, from another process.
    store = Store(service.database)
    keyring = Keyring(load_or_create_master_key(folder / "secret.key"))
    issued = issue(store, keyring, ca, HOST)
    service.start()
    caddy = CustomersCaddy(folder / "caddy", terminator=f"http://127.0.0.1:{terminator}", upstream=f"127.0.0.1:{service.port}",
                           caddyfile=caddyfile, caddy=binary)
    try:
        caddy.start()
    except BaseException:
        service.stop()
        raise
    yield Stack(service, caddy, issued, store, keyring)
    caddy.stop()
    service.stop()
    store.close()


def test_a_handshake_with_the_customers_hostname_gets_our_certificate(stack, ca):
    assert presented(stack.caddy.https_port, HOST, ca).serial_number == stack.issued.serial


def test_a_request_to_the_customers_hostname_reaches_the_application(stack, ca):
    context = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    r = fetch(f"https://{HOST}:{stack.caddy.https_port}", "GET", "/healthz", context=context)
    assert r.status == 200  # the application here is the service itself


def test_a_certificate_issued_while_caddy_runs_is_served(stack, ca):
    """Stored by another process after the service loaded its index: found at the first handshake
    that misses it (once the index is a second old)."""
    time.sleep(1.1)  # ordering, not timing: the index must be older than the one-second check interval
    issued = issue(stack.store, stack.keyring, ca, "new.customer.test")
    assert presented(stack.caddy.https_port, "new.customer.test", ca).serial_number == issued.serial


def test_an_unknown_hostname_fails_the_handshake_and_caddy_obtains_nothing(stack, ca):
    with pytest.raises(ssl.SSLError):
        presented(stack.caddy.https_port, "unknown.customer.test", ca)
    log = stack.caddy.log.read_text()
    assert "unknown.customer.test" in log  # Caddy asked (and was refused) ...
    assert "obtaining certificate" not in log and "tls.obtain" not in log  # ... and obtained nothing itself


def test_the_secret_is_not_in_the_services_log(stack, ca):
    presented(stack.caddy.https_port, HOST, ca)
    with pytest.raises(ssl.SSLError):
        presented(stack.caddy.https_port, "unknown.customer.test", ca)
    time.sleep(0.2)  # INFO and DEBUG lines are flushed within 0.1 s
    text = stack.service.log.read_text()
    assert "/caddy/certificate" in text and SECRET not in text


def on_demand_block(path) -> list[str]:
    """The lines of a Caddyfile outside its comments and its ``on_demand_tls`` block."""
    kept, inside = [], False
    for line in path.read_text().splitlines():
        if line.strip().startswith("on_demand_tls"):
            inside = True
        elif inside and line.strip() == "}":
            inside = False
        elif not inside and not line.lstrip().startswith("#"):
            kept.append(line)
    return kept


def test_the_two_forms_differ_in_their_on_demand_block_alone():
    assert on_demand_block(CADDYFILE) == on_demand_block(CADDYFILE_2_8)
    assert "\t\tpermission http {$CPS_TLS_TERMINATOR:" in CADDYFILE_2_8.read_text()
    assert "\t\task {$CPS_TLS_TERMINATOR:" in CADDYFILE.read_text()


def test_caddy_2_6_refuses_the_2_8_form_so_debian_runs_the_other(tmp_path):
    """Why there are two files: Debian 12's Caddy does not know ``permission``."""
    version = subprocess.run([CADDY, "version"], check=False, capture_output=True, text=True).stdout if CADDY else ""
    if not version.lstrip("v").startswith("2.6"):
        pytest.skip("Debian's Caddy 2.6 is not the caddy installed here")
    adapted = subprocess.run([CADDY, "adapt", "--config", str(CADDYFILE_2_8), "--adapter", "caddyfile"],
                             check=False, capture_output=True, text=True, env={"HOME": str(tmp_path), "CPS_TLS_SECRET": "x"})
    assert adapted.returncode != 0 and "unrecognized parameter 'permission'" in adapted.stderr
