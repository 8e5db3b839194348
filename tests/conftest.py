"""Fixtures.

- ``clock``: a FakeClock; tests move time explicitly.
- ``oidc_issuer``: a real OIDC issuer on loopback (one per session), see tests/servers/oidc.py.
- ``dns``: a real DNS server on 127.0.0.1 (one per session, emptied after each test).
- ``config``: defaults with storage in a temporary folder, the test issuer and the test DNS
  server configured, so no test ever reaches outside the machine.
- ``services``: the real Services built from ``config`` (only the clock is a fake).
- ``app``: the real Tornado application, served by pytest-tornado's ``http_server``.
- ``api``: the request helper of tests/helpers.py bound to that server.
- ``world``: workspaces, users, sessions and keys made through the service's own core code.
"""

from __future__ import annotations

import pytest

from core.config import Config, DnsConfig, OidcConfig, StorageConfig
from core.runtime.assembly import build_services
from handlers.limits import LimitedHTTPServer
from handlers.server import make_app
from tests.fakes import FakeClock
from tests.helpers import Api, World
from tests.servers.dns import DnsServer
from tests.servers.oidc import CLIENT_ID, OidcIssuer


@pytest.fixture(scope="session")
def oidc_issuer():
    issuer = OidcIssuer().start()
    yield issuer
    issuer.stop()


@pytest.fixture(scope="session")
def dns_server():
    server = DnsServer().start()
    yield server
    server.stop()


@pytest.fixture
def dns(dns_server):
    yield dns_server
    dns_server.clear()


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def config(tmp_path, oidc_issuer, dns):
    return Config(
        storage=StorageConfig(path=str(tmp_path / "service.sqlite3"), secret_key_file=str(tmp_path / "secret.key")),
        oidc=OidcConfig(issuer=oidc_issuer.issuer, client_id=CLIENT_ID),
        dns=DnsConfig(nameservers=[dns.address], timeout_seconds=0.5),
    )


@pytest.fixture
def services(config, clock):
    services = build_services(config, clock=clock)
    blocking: list[str] = []
    if services.store.pg is None:
        services.store.watch_loop_calls(blocking.append)
    yield services
    services.close()
    # On PostgreSQL each of these would block the event loop on the network (store/__init__.py).
    assert not blocking, f"store calls on the event loop outside Store.run: {sorted(set(blocking))[:10]}"


@pytest.fixture
def app(services):
    return make_app(services)


@pytest.fixture
def api(http_client, base_url):
    return Api(http_client, base_url)


@pytest.fixture
def world(services, oidc_issuer, clock):
    return World(services, oidc_issuer, clock)


@pytest.fixture
def http_server(request, io_loop, _unused_port, app):
    """The service's own server class (its limits included), in place of pytest-tornado's plain one."""
    server = LimitedHTTPServer(app)
    server.add_socket(_unused_port[0])
    yield server
    server.stop()
    io_loop.run_sync(server.close_all_connections, timeout=5)


def pytest_collection_modifyitems(items):
    """The check that every documented status code was reached runs last, after every answer it counts."""
    items.sort(key=lambda item: item.path.name == "test_documented_statuses.py")  # stable: nothing else moves
