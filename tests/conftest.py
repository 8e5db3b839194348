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

from app import make_app
from core.config import Config, DnsConfig, OidcConfig, StorageConfig
from core.services import build_services
from handlers.limits import LimitedHTTPServer
from tests.fakes import FakeClock
from tests.helpers import OBSERVED, Api, World, openapi
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
    yield services
    services.close()


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


#: Responses any operation may give for reasons of the whole service (limits, faults): reaching
#: each once, on any operation, is enough.
SHARED_RESPONSES = {"RateLimited", "InternalError", "UpstreamError", "StorageUnavailable", "ProviderBusy"}


def unreached_statuses() -> list[str]:
    """Documented (operation, status) pairs that no test of this run received."""
    documented_shared, reached_shared, missing = set(), set(), []
    for template, item in openapi()["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for status, response in operation["responses"].items():
                name = response.get("$ref", "").rsplit("/", 1)[-1]
                reached = (method.upper(), template, int(status)) in OBSERVED
                if name in SHARED_RESPONSES:
                    documented_shared.add(name)
                    if reached:
                        reached_shared.add(name)
                elif not reached:
                    missing.append(f"{method.upper()} {template} {status}")
    return missing + [f"any operation: {name}" for name in sorted(documented_shared - reached_shared)]


def pytest_sessionfinish(session, exitstatus):
    """After a whole, green run: every documented status code must have been reached by a test."""
    config = session.config
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.keyword \
        and not config.option.markexpr and not config.option.lf
    if not whole or exitstatus != 0 or session.testsfailed:
        return
    missing = unreached_statuses()
    if missing:
        print("\nDocumented status codes no test reached:\n  " + "\n  ".join(missing))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
