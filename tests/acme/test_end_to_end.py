"""Issue 39, item 6, the whole way with real parts: ``python app.py`` as the ACME client and the
delegation zone's authoritative server; the customer's CNAME in NSD; Pebble validating through
Unbound; and Debian's Caddy (deploy/Caddyfile.customers) serving the customer's hostname with the
certificate, which a client checks against Pebble's root.

Issue 46, on the real clock: a deleted domain refused by the terminator (and so by Caddy) within
seconds and revoked at Pebble within a minute; a hostname moved to another workspace leaving the
old one's ``verified`` at the next sweep, and Caddy serving the new workspace's certificate. Each
prints what it measured (``pytest -s``)."""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request

import attrs
import dns.resolver
import pytest

from core.config import load_config
from core.identity import accounts, api_keys
from core.runtime.assembly import build_services
from tests.acme.conftest import CUSTOMER_ZONE, ZONE, needs_lab
from tests.patience import PATIENCE_SECONDS
from tests.servers.caddy import CADDY
from tests.servers.service import ServiceProcess, call, free_port
from tests.servers.terminators import SECRET, CustomersCaddy, presented

pytestmark = [needs_lab, pytest.mark.skipif(CADDY is None, reason="caddy is not installed (apt-get install caddy)")]
HOST = "www.lab.com"


@pytest.fixture
def answering():
    """The service process answers for the delegation zone itself."""


@pytest.fixture(scope="module")
def stack(acme_lab, tmp_path_factory):
    folder = tmp_path_factory.mktemp("acme-end-to-end")
    terminator = free_port()
    service = ServiceProcess(folder, dns_address=acme_lab.lab.resolver, extra=(
        f'[provider]\nkind = "acme"\n[provider.acme]\ndirectory_url = "{acme_lab.directory.directory_url}"\n'
        f'ca_bundle = "{acme_lab.pebble.ca_bundle}"\n'
        f'[delegation_dns]\nzone = "{ZONE}"\nnameservers = ["ns1.saas.test"]\nlisten = "127.0.0.1:{acme_lab.dns_port}"\n'
        f'[tls_terminator]\nlisten = "127.0.0.1:{terminator}"\nsecret = "{SECRET}"\n'
        '[network]\nallow_private_ranges = ["127.0.0.0/29"]\n'
    ))
    tokens = asyncio.run(_api_keys(service))
    service.start()
    caddy = CustomersCaddy(folder / "caddy", terminator=f"http://127.0.0.1:{terminator}",
                           upstream=f"127.0.0.1:{service.port}")
    try:
        caddy.start()
    except BaseException:
        service.stop()
        raise
    yield Stack(service, caddy, tokens[0], tokens[1], f"http://127.0.0.1:{terminator}")
    caddy.stop()
    service.stop()


@attrs.frozen
class Stack:
    service: ServiceProcess
    caddy: CustomersCaddy
    token: str
    other_token: str
    "A key of another workspace (a customer moving a hostname)."
    terminator: str


async def _api_keys(service: ServiceProcess) -> list[str]:
    """Two workspaces and a ``*`` key of each, made through the service's own code before it starts."""
    services = build_services(load_config(service.config))
    try:
        secrets = []
        for name in ("SaaS", "Other"):
            workspace, _ = accounts.create_workspace(services, name=name, owner_email=f"ops@{name.lower()}.test")
            secrets.append(api_keys.create(services, workspace_id=workspace.id,
                                           request=api_keys.CreateKeyRequest(name="e2e", scopes=["*"]))[1])
        return secrets
    finally:
        services.close()


def test_records_published_lead_to_a_certificate_caddy_serves(stack, acme_lab):
    service, caddy, token = stack.service, stack.caddy, stack.token
    status, created = call(service.base_url, "POST", "/v1/domains", {"apex": HOST}, token=token)
    assert status == 201, created
    acme_lab.publish_records(created)
    status, result = call(service.base_url, "POST", f"/v1/domains/{created['id']}/verify-delegation", token=token)
    assert (status, result["certificate"]["status"]) == (200, "active"), result
    deadline = time.monotonic() + PATIENCE_SECONDS  # the index follows the database at most a second behind
    while True:
        try:
            certificate = presented(caddy.https_port, HOST, acme_lab.pebble.root_pem())
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert "Pebble Intermediate CA" in certificate.issuer.rfc4514_string()


def until(condition, what: str):
    """Poll ``condition`` until it answers something true (returned): a bound only a hang reaches,
    never a busy machine (the resolver once took more than 15 s at load average 6)."""
    seconds = PATIENCE_SECONDS
    deadline = time.monotonic() + seconds
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.1)


def serial_served(caddy, host, root) -> int | None:
    """The serial number of the certificate Caddy presents for ``host``; None when the handshake fails."""
    try:
        return presented(caddy.https_port, host, root).serial_number
    except OSError:
        return None


def terminator_status(stack, host) -> int:
    url = f"{stack.terminator}/caddy/ask?domain={host}&secret={SECRET}"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def publish(acme_lab, created, token_of=None) -> None:
    """The CNAME, and the ownership TXT with ``token_of``'s token, TTL 1 (a switch is seen a second later)."""
    apex = created["apex"]
    for name in (f"_service-verify.{apex}", f"_acme-challenge.{apex}"):
        acme_lab.lab.remove(CUSTOMER_ZONE, name)
    acme_lab.lab.publish_many(CUSTOMER_ZONE, [
        f"_acme-challenge.{apex}. 1 IN CNAME {created['validation']['delegation']['value']}.",
        f'_service-verify.{apex}. 1 IN TXT "{(token_of or created)["validation"]["ownership"]["value"]}"'])


def resolver_answers(acme_lab, name, value) -> bool:
    resolver = dns.resolver.Resolver(configure=False)
    address, port = acme_lab.lab.resolver.split(":")
    resolver.nameservers, resolver.port = [address], int(port)
    try:
        return any(value in r.to_text() for r in resolver.resolve(name, "TXT"))
    except dns.exception.DNSException:
        return False


def added(stack, acme_lab, host, token, token_of=None):
    status, created = call(stack.service.base_url, "POST", "/v1/domains", {"apex": host}, token=token)
    assert status == 201, created
    publish(acme_lab, created, token_of)
    return created


def verified(stack, created, token):
    status, result = call(stack.service.base_url, "POST", f"/v1/domains/{created['id']}/verify-delegation", token=token)
    assert (status, result["status"], result["certificate"]["status"]) == (200, "verified", "active"), result
    return result


def test_a_deleted_domain_is_refused_within_seconds_and_revoked_within_a_minute(stack, acme_lab):
    host, root = "deleted.lab.com", acme_lab.pebble.root_pem()
    created = added(stack, acme_lab, host, stack.token)
    verified(stack, created, stack.token)
    serial = until(lambda: serial_served(stack.caddy, host, root), "Caddy serving the certificate")
    status, _ = call(stack.service.base_url, "DELETE", f"/v1/domains/{created['id']}", token=stack.token)
    assert status == 204
    deleted = time.monotonic()
    until(lambda: terminator_status(stack, host) == 404, "the terminator refusing the deleted hostname")
    refused = time.monotonic() - deleted
    until(lambda: serial_served(stack.caddy, host, root) is None, "Caddy failing the handshake")
    until(lambda: acme_lab.pebble.certificate_status(serial) == "Revoked", "the certificate revoked at Pebble")
    revoked = time.monotonic() - deleted
    print(f"\ndeleted domain: terminator 404 after {refused:.1f} s, revoked at Pebble after {revoked:.1f} s")
    assert revoked < 60


def test_a_moved_hostname_leaves_the_old_workspace_and_caddy_serves_the_new_certificate(stack, acme_lab):
    host, root = "moved.lab.com", acme_lab.pebble.root_pem()
    old = added(stack, acme_lab, host, stack.token)
    verified(stack, old, stack.token)
    old_serial = until(lambda: serial_served(stack.caddy, host, root), "Caddy serving the first certificate")
    new = added(stack, acme_lab, host, stack.other_token)
    until(lambda: resolver_answers(acme_lab, f"_service-verify.{host}", new["validation"]["ownership"]["value"]),
          "the resolver seeing the new token")
    verified(stack, new, stack.other_token)
    moved = time.monotonic()

    def old_left() -> bool:
        status, domain = call(stack.service.base_url, "GET", f"/v1/domains/{old['id']}", token=stack.token)
        return status == 200 and domain["validation"]["status"] == "error"

    new_serial = until(lambda: (s := serial_served(stack.caddy, host, root)) != old_serial and s,
                       "Caddy serving the new workspace's certificate")
    served = time.monotonic() - moved
    until(old_left, "the old workspace's domain leaving verified")
    left = time.monotonic() - moved
    print(f"\nmoved hostname: Caddy serves the new certificate after {served:.1f} s, "
          f"the old workspace leaves verified after {left:.1f} s")
    assert serial_served(stack.caddy, host, root) == new_serial


def test_the_start_up_log_names_the_ca_reached_and_the_terminator_never_its_secret(stack, acme_lab):
    """Issue 48 item 4: once listening, the service says which CA it orders from and whether its
    directory answered with ``ca_bundle`` (core/runtime/acme_setup.py), as check-config does."""
    url = acme_lab.directory.directory_url
    said = until(lambda: [line for line in stack.service.log.read_text().splitlines()
                          if f"ACME: certificate authority {url}: " in line], "the CA in the log")
    assert "its directory answered (HTTPS trusted by [provider.acme] ca_bundle" in said[0]
    text = stack.service.log.read_text()
    assert "ACME: TLS terminator endpoints (Caddy's get_certificate, ask and permission)" in text
    assert SECRET not in text
