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

import asyncio
import os
import shutil
import sys

import pytest
import tornado.ioloop

from core.config import Config, DnsConfig, OidcConfig, StorageConfig
from core.runtime.assembly import build_services
from handlers.limits import LimitedHTTPServer
from handlers.server import make_app
from tests.fakes import FakeClock
from tests.helpers import Api, World
from tests.postgres_fixtures import api_database, empty, postgres_server, postgres_url  # noqa: F401
from tests.servers.dns import DnsServer
from tests.servers.oidc import CLIENT_ID, OidcIssuer


@pytest.fixture
def io_loop():
    """pytest-tornado's, also closing the loop that asyncio made on Tornado's behalf: making an IOLoop
    current asks asyncio for the thread's loop to restore later, and after an ``asyncio.run`` (the
    store's tests) asyncio makes a new one, which nothing closed. Garbage-collected in some later
    test, it raised a ResourceWarning there (its socket pair), an error under ``filterwarnings``."""
    loop = tornado.ioloop.IOLoop()
    loop.make_current()
    yield loop
    made = getattr(loop, "old_asyncio", None)
    loop.clear_current()
    loop.close(all_fds=True)
    if made is not None and not made.is_running() and not made.is_closed():
        made.close()
        asyncio.set_event_loop(None)


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


#: Where the API tests run on both backends (each test twice: ``[sqlite]`` and ``[postgresql]``).
BOTH_BACKENDS = ("tests/api/",)


def pytest_generate_tests(metafunc):
    if "backend" not in metafunc.fixturenames:
        return
    path = str(metafunc.definition.path).replace("\\", "/")
    both = any(part in path for part in BOTH_BACKENDS) and not metafunc.definition.get_closest_marker("sqlite_only")
    metafunc.parametrize("backend", ["sqlite", "postgresql"] if both else ["sqlite"], indirect=True)


@pytest.fixture
def backend(request):
    """The storage backend of the service under test: SQLite, or PostgreSQL for the tests in
    ``BOTH_BACKENDS`` (a database emptied after each test)."""
    if request.param == "sqlite":
        yield None
        return
    url = request.getfixturevalue("api_database")
    yield url
    empty(url)


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory):
    """An empty SQLite database with every migration applied, copied for each test on SQLite: the
    migrations are the same each time, and running them took a fifth of an API test's set-up.
    (Migrations themselves are tested from scratch in tests/test_upgrades.py and tests/store/.)"""
    folder = tmp_path_factory.mktemp("migrated")
    build_services(Config(storage=StorageConfig(path=str(folder / "service.sqlite3"),
                                                secret_key_file=str(folder / "secret.key")))).close()
    return folder / "service.sqlite3"


@pytest.fixture
def config(tmp_path, oidc_issuer, dns, backend, migrated_sqlite):
    if not backend:
        shutil.copy(migrated_sqlite, tmp_path / "service.sqlite3")
    return Config(
        storage=StorageConfig(path=str(tmp_path / "service.sqlite3"), secret_key_file=str(tmp_path / "secret.key"),
                              url=backend or ""),
        oidc=OidcConfig(issuer=oidc_issuer.issuer, client_id=CLIENT_ID),
        dns=DnsConfig(nameservers=[dns.address], timeout_seconds=0.5),
    )


@pytest.fixture
def services(config, clock):
    services = build_services(config, clock=clock)
    services.store.keep_domains()  # as start_jobs does in a serving process
    blocking: list[str] = []
    services.store.watch_loop_calls(blocking.append, exempt=called_by_a_test)
    yield services
    services.close()
    # On PostgreSQL each of these would block the event loop on the network (store/__init__.py).
    assert not blocking, f"store calls on the event loop outside Store.run: {sorted(set(blocking))[:10]}"


def called_by_a_test() -> bool:
    """Whether test code is on the stack: tests may block the loop on the store; the service may not."""
    frame = sys._getframe(2)
    while frame is not None:
        if f"{os.sep}tests{os.sep}" in frame.f_code.co_filename and not frame.f_code.co_filename.endswith("conftest.py"):
            return True
        frame = frame.f_back
    return False


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
