"""Issue 39, item 6, the whole way with real parts: ``python app.py`` as the ACME client and the
delegation zone's authoritative server; the customer's CNAME in NSD; Pebble validating through
Unbound; and Debian's Caddy (deploy/Caddyfile.customers) serving the customer's hostname with the
certificate, which a client checks against Pebble's root."""

from __future__ import annotations

import asyncio
import time

import pytest

from core.config import load_config
from core.identity import accounts, api_keys
from core.runtime.assembly import build_services
from tests.acme.conftest import ZONE, needs_lab
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
    token = asyncio.run(_api_key(service))
    service.start()
    caddy = CustomersCaddy(folder / "caddy", terminator=f"http://127.0.0.1:{terminator}",
                           upstream=f"127.0.0.1:{service.port}")
    try:
        caddy.start()
    except BaseException:
        service.stop()
        raise
    yield service, caddy, token
    caddy.stop()
    service.stop()


async def _api_key(service: ServiceProcess) -> str:
    """A workspace and a ``*`` key, made through the service's own code before it starts."""
    services = build_services(load_config(service.config))
    try:
        workspace, _ = accounts.create_workspace(services, name="SaaS", owner_email="ops@saas.test")
        _, secret = api_keys.create(services, workspace_id=workspace.id,
                                    request=api_keys.CreateKeyRequest(name="e2e", scopes=["*"]))
        return secret
    finally:
        services.close()


def test_records_published_lead_to_a_certificate_caddy_serves(stack, acme_lab):
    service, caddy, token = stack
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
