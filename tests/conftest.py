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
import tempfile

import pytest
import tornado.ioloop

from core.config import Config, OidcConfig, StorageConfig
from core.runtime.assembly import build_services
from handlers.limits import LimitedHTTPServer
from handlers.server import make_app
from tests.fakes import FakeClock
from tests.helpers import OBSERVED, Api, World
from tests.patience import PATIENCE_SECONDS
from tests.postgres_fixtures import api_database, empty, postgres_server, postgres_url  # noqa: F401
from tests.servers.dns import DnsServer
from tests.servers.oidc import CLIENT_ID, OidcIssuer

#: Where the tests' files go when the machine has a RAM-backed filesystem and TMPDIR is not set.
MEMORY_FOLDER = "/dev/shm"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Every temporary folder of the run (pytest's ``tmp_path``, ``tempfile``'s, the servers' data,
    Chromium's profiles) on a RAM-backed filesystem where there is one: a test's SQLite file is
    synced on every checkpoint, its secret key on creation, and on a shared virtual disk each sync
    took 35-45 ms, a fifth of an API test's time. What the tests check of durability is a process's
    crash (its writes are in the kernel's cache either way), never the machine's. Set before pytest
    picks its base folder; pytest-xdist's workers and every server started inherit it."""
    if hasattr(config, "workerinput"):
        return
    if not os.environ.get("TMPDIR") and os.access(MEMORY_FOLDER, os.W_OK):
        os.environ["TMPDIR"] = MEMORY_FOLDER
        tempfile.tempdir = None  # computed again from TMPDIR on next use
    keep_bytecode_outside_the_checkout()


def keep_bytecode_outside_the_checkout() -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (as in many containers), every process of the run
    compiled every module it imported from source: each worker's test modules, and the service
    and each command the tests start, some 250 of them, half a second each. Its aim is a checkout
    without ``__pycache__`` folders, which a bytecode folder under the temporary folder keeps
    (PYTHONPYCACHEPREFIX, inherited by the workers and every process they start)."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    folder = os.path.join(tempfile.gettempdir(), f"cps-tests-bytecode-{os.getuid()}")
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = folder
    sys.dont_write_bytecode = False
    sys.pycache_prefix = folder


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
def dns_timeout() -> float:
    """``[dns] timeout_seconds`` of ``config`` (see ``DnsServer.config``): a test of names the test
    DNS server leaves unanswered overrides this fixture with a short one."""
    return PATIENCE_SECONDS


@pytest.fixture
def config(tmp_path, oidc_issuer, dns, backend, migrated_sqlite, dns_timeout):
    if not backend:
        shutil.copy(migrated_sqlite, tmp_path / "service.sqlite3")
    return Config(
        storage=StorageConfig(path=str(tmp_path / "service.sqlite3"), secret_key_file=str(tmp_path / "secret.key"),
                              url=backend or ""),
        oidc=OidcConfig(issuer=oidc_issuer.issuer, client_id=CLIENT_ID),
        dns=dns.config(timeout_seconds=dns_timeout),
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
    io_loop.run_sync(server.close_all_connections, timeout=PATIENCE_SECONDS)


#: Test modules each run whole on one pytest-xdist worker: their module-scoped set-up costs more than
#: their tests (a docs build; a service and Chromium; npm and a generated client; a documented recipe
#: or trial run end to end; Caddy in front of the service), and would otherwise run on every worker.
WHOLE_ON_ONE_WORKER = frozenset({
    "tests/test_docs.py",
    "tests/test_generated_clients.py",
    "tests/test_postgres_trial.py",
    "tests/test_acme_trial.py",
    "tests/test_webhook_recipe.py",
    "tests/test_reverse_proxy.py",
    "tests/test_tls_terminator_caddy.py",
    "tests/api/test_dns_lab.py",
})
#: Folders whose modules each run whole on one worker, for the same reason: each ACME module starts its
#: lab (NSD, Unbound and Pebble), each browser module a service and Chromium.
WHOLE_FOLDERS = ("tests/acme/", "tests/browser/")


#: pytest-xdist workers per CPU core for ``-n auto``: a test spends most of its time waiting on a
#: real server, a browser or a subprocess. With two a core, the cores of a two-core machine were idle
#: 6.6-6.9 % of a run, mostly while the longest tests waited together; with two and a half, 2.2 %.
WORKERS_PER_CORE = 2.5


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own reading of it
    return max(1, round(WORKERS_PER_CORE * len(os.sched_getaffinity(0))))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's ``load`` distribution (each test to whichever worker is free), but with the
    modules of ``WHOLE_ON_ONE_WORKER`` each kept whole, and sent out first. (``--dist loadgroup``
    with ``xdist_group`` marks would say so in each module, but pytest-xdist 3.8 on pytest 9.2
    ignores the marks: pytest-dev/pytest-xdist#1386.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesWhole(LoadScopeScheduling):
        """Work units, largest first: a whole module of the list, or a single test."""

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in WHOLE_ON_ONE_WORKER or module.startswith(WHOLE_FOLDERS) else nodeid

    return ModulesWhole(config, log)


STATUS_CHECK = ("tests/contract/test_documented_statuses.py::"
                "test_every_documented_status_code_is_reached_by_a_test")
"Compares the answers of the whole run: under pytest-xdist, the controller runs it (below)."


#: Modules whose tests take the longest one by one (20-60 s each: fuzzing, several service processes,
#: a walk through the README): sent out first, as they came last in the order of collection, where one
#: of them left a core idle for the run's last half-minute.
LONGEST_FIRST = frozenset({
    "tests/contract/test_fuzz.py",
    "tests/test_lifecycle_processes.py",
    "tests/test_postgres_processes.py",
    "tests/test_readme.py",
    "tests/test_durability.py",
    "tests/store/test_text_index.py",
})


def pytest_collection_modifyitems(config, items):
    """The tests of ``LONGEST_FIRST`` run first; the check that every documented status code was
    reached runs last, after every answer it counts.

    Under pytest-xdist a worker sees only its own tests' answers, so no worker runs that check: each
    hands its answers to the controller, which runs the check once they are all done."""
    items.sort(key=lambda item: (item.path.name == "test_documented_statuses.py",  # stable: nothing else moves
                                 item.nodeid.split("::", 1)[0] not in LONGEST_FIRST))
    if hasattr(config, "workeroutput"):  # a pytest-xdist worker; every worker leaves out the same test
        check = [item for item in items if item.nodeid == STATUS_CHECK]
        config.workeroutput["status_check_selected"] = bool(check)
        if check:
            items.remove(check[0])
            config.hook.pytest_deselected(items=check)


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # sent to the controller with the worker's last word
        session.config.workeroutput["observed"] = sorted(OBSERVED)


WORKERS_OBSERVED = pytest.StashKey[set[tuple[str, str, int]]]()
"What the pytest-xdist workers' tests observed (the controller's side), once they are done."
CHECK_SELECTED = pytest.StashKey[bool]()
"Whether the workers left the documented status codes' check out of the run for the controller."


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """A pytest-xdist worker is done (the controller's side)."""
    output = getattr(node, "workeroutput", None) or {}
    observed = node.config.stash.setdefault(WORKERS_OBSERVED, set())
    observed.update(tuple(answer) for answer in output.get("observed", ()))
    if output.get("status_check_selected"):
        node.config.stash[CHECK_SELECTED] = True


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    """Under pytest-xdist, once every worker is done: the documented status codes' check, on what
    all of them observed, reported as the test it is (the run fails if it does)."""
    result = yield
    stash = session.config.stash
    if session.config.pluginmanager.has_plugin("dsession") and stash.get(CHECK_SELECTED, False):
        _report_status_check(session, stash.get(WORKERS_OBSERVED, set()))
    return result


def _report_status_check(session, observed):
    from tests.contract import test_documented_statuses as module

    path, name = STATUS_CHECK.split("::")
    line = getattr(module, name).__code__.co_firstlineno
    location = (path, line - 1, name)  # pytest's locations count lines from 0
    outcome, longrepr = "passed", None
    try:
        module.compare(session.config, session.testsfailed, observed)
    except pytest.skip.Exception as skipped:
        outcome, longrepr = "skipped", (path, line, f"Skipped: {skipped.msg}")
    except AssertionError as failed:
        outcome, longrepr = "failed", f"{path}:{line}: AssertionError: {failed}"
    session.testscollected += 1  # the workers' count left it out
    hook = session.config.hook
    hook.pytest_runtest_logstart(nodeid=STATUS_CHECK, location=location)
    for when in ("setup", "call", "teardown"):
        hook.pytest_runtest_logreport(report=pytest.TestReport(
            STATUS_CHECK, location, {name: 1}, outcome if when == "call" else "passed",
            longrepr if when == "call" else None, when))
    hook.pytest_runtest_logfinish(nodeid=STATUS_CHECK, location=location)
