"""Start-up (issue 49): once the service listens, the work no request needs stays off the event loop
that answers the first requests, and the modules of what this configuration does not run are not
imported at all."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading

import pytest

from core.config import Config, LifecycleConfig, ServerConfig, StorageConfig
from core.hostnames import public_suffixes
from core.runtime.assembly import build_services
from core.runtime.sockets import bind
from handlers.server import serve
from tests.patience import PATIENCE_SECONDS
from tests.servers.service import ROOT


@pytest.mark.gen_test
async def test_the_public_suffix_list_is_parsed_once_listening_off_the_event_loop(tmp_path):
    config = Config(server=ServerConfig(port=0),
                    storage=StorageConfig(path=str(tmp_path / "db.sqlite3"), secret_key_file=str(tmp_path / "secret.key")),
                    lifecycle=LifecycleConfig(enabled=False))
    bound = bind(config)
    config = config.bound_to(bound.server[0].getsockname()[1])
    services = build_services(config)
    public_suffixes.cache_clear()
    parsing = public_suffixes.__wrapped__.__code__  # the parse itself: a cached call never reaches it
    parsed_on: list[str] = []

    def watch(frame, event, arg):
        if event == "call" and frame.f_code is parsing:
            parsed_on.append(threading.current_thread().name)

    threading.setprofile(watch)  # threads started from now on: the parse's
    sys.setprofile(watch)  # this one: the event loop's
    serving = asyncio.ensure_future(serve(config, services, bound))
    try:
        deadline = asyncio.get_running_loop().time() + PATIENCE_SECONDS
        while public_suffixes.cache_info().currsize == 0 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGTERM)  # serve's own way out: it drains and closes its listeners
        await serving
        services.close()
    assert len(parsed_on) == 1 and parsed_on[0] != threading.main_thread().name, parsed_on


def run_on_a_new_database(tmp_path, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by a fresh Python in the checkout, given a configuration file (a new SQLite
    database, the lifecycle off) as its first argument."""
    config = tmp_path / "service.toml"
    config.write_text(f'[server]\nport = 0\n[storage]\npath = "{tmp_path / "db.sqlite3"}"\n'
                      f'secret_key_file = "{tmp_path / "secret.key"}"\n[lifecycle]\nenabled = false\n')
    return subprocess.run([sys.executable, "-c", script, str(config)], cwd=ROOT, capture_output=True, text=True,
                          timeout=PATIENCE_SECONDS, check=False)


def test_serving_with_the_sandbox_provider_imports_neither_the_acme_client_nor_dnspython_nor_jinja(tmp_path):
    """The ACME provider's client (certbot's acme, requests, pyOpenSSL), dnspython (the DNS probes and
    the delegation zone's server) and Jinja (the portal's pages) are imported by what uses them:
    together they were most of a start-up that serves none of them (issue 49)."""
    script = (
        "import sys, app\n"
        "from handlers.server import make_app\n"
        "config = app.load(app.cli.parse_args(['--config', sys.argv[1]]), serving=True)\n"
        "services = app.open_services(config)\n"
        "make_app(services)\n"
        "print(sorted(set(sys.modules) & {'acme', 'requests', 'OpenSSL', 'dns.message', 'jinja2'}))\n"
        "services.close()\n"
    )
    done = run_on_a_new_database(tmp_path, script)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_only_a_store_on_sqlite_imports_sqlite_utils(tmp_path):
    """sqlite-utils is SQLite's connection (store/sqlite/connection.py): the service's modules name it
    for their type hints only, so a store on PostgreSQL never imports it (0.06 s of its start-up)."""
    script = "import sys, app, store, handlers.server, core.runtime.assembly\nprint('sqlite_utils' in sys.modules)\n"
    done = run_on_a_new_database(tmp_path, script)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_start_up_runs_no_full_collection_and_freezes_what_it_built(tmp_path):
    """Start-up's objects (modules, classes, the services) live as long as the process: a full
    collection in the middle of start-up went over some 50,000 of them for nothing, twice, and
    every later one again (issue 49)."""
    script = (
        "import gc, sys\n"
        "full = []\n"
        "gc.callbacks.append(lambda phase, info: full.append(1) if phase == 'stop' and info['generation'] == 2 else None)\n"
        "import app\n"
        "config, services, bound, serve = app.start(app.cli.parse_args(['--config', sys.argv[1]]))\n"
        "print(len(full), gc.get_freeze_count() > 10_000, gc.isenabled())\n"
        "services.close()\n"
        "bound.close()\n"
    )
    done = run_on_a_new_database(tmp_path, script)
    assert (done.returncode, done.stdout.strip()) == (0, "0 True True"), done.stderr


#: What start-up imported, read or loaded before the first answer, and no GET of a domain needs: each is
#: imported by what uses it (issue 49). The development provider's key is read with joserfc, x509's
#: names compiled with it; Tornado's HTTP client fetches from the identity provider.
NOT_BEFORE_THE_FIRST_ANSWER = {
    "joserfc", "cryptography.x509", "aiodns", "pycares", "core.dns.ares",
    "core.domain_connect.signing", "core.domain_connect.discovery", "core.edge.cloudflare",
    "core.verification.acme_findings", "core.acme.failures", "store.inspection", "tornado.httpclient",
}


def at_the_first_answer(tmp_path, seen: str) -> tuple[int, str]:
    """The real service, started by app.py's own ``start`` on a database with a workspace, its key and
    a domain, answers a GET of the domain by key: its exit code, and its status with ``seen`` (an
    expression) evaluated in the service's process as soon as the answer came."""
    from core.domains import operations
    from core.identity import accounts, api_keys

    config = Config(server=ServerConfig(port=0),
                    storage=StorageConfig(path=str(tmp_path / "db.sqlite3"), secret_key_file=str(tmp_path / "secret.key")),
                    lifecycle=LifecycleConfig(enabled=False))
    services = build_services(config)
    try:
        workspace, _ = accounts.create_workspace(services, name="Start-up", owner_email="ops@example.com")
        _, key = api_keys.create(services, workspace_id=workspace.id,
                                 request=api_keys.CreateKeyRequest(name="first", scopes=["*"]))
        created = asyncio.run(operations.bulk_create(
            services, workspace=workspace, request=operations.BulkCreate(apex_list=["shop.example.com"])))
    finally:
        services.close()
    script = (
        "import asyncio, http.client, os, signal, sys, app\n"
        "config, services, bound, serve = app.start(app.cli.parse_args(['--config', sys.argv[1]]))\n"
        "port = bound.server[0].getsockname()[1]\n"
        "def get():\n"
        "    connection = http.client.HTTPConnection('127.0.0.1', port, timeout=60)\n"
        f"    connection.request('GET', '/v1/domains/{created.created[0].id}', headers={{'Authorization': 'Bearer {key}'}})\n"
        "    return connection.getresponse().status\n"
        "async def first_answer():\n"
        "    serving = asyncio.ensure_future(serve(config, services, bound))\n"
        "    status = await asyncio.get_running_loop().run_in_executor(None, get)\n"
        f"    print(status, {seen})\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    await serving\n"
        "asyncio.run(first_answer())\n"
        "services.close()\n"
    )
    done = run_on_a_new_database(tmp_path, script)
    return done.returncode, done.stdout.strip() or done.stderr


def test_the_first_answer_to_a_get_by_key_comes_before_what_it_does_not_use_is_imported(tmp_path):
    """By the first answer none of ``NOT_BEFORE_THE_FIRST_ANSWER`` is imported, and the system's CAs
    are not loaded (no request has gone out)."""
    seen = f"sorted(set(sys.modules) & {set(NOT_BEFORE_THE_FIRST_ANSWER)!r}), callable(services.outbound.pool._tls)"
    assert at_the_first_answer(tmp_path, seen) == (0, "200 [] True")


def test_the_public_suffix_list_is_not_being_parsed_before_the_first_answer(tmp_path):
    """Its thread, started with the loop, took the GIL each time the loop let it go (a socket, an
    SQLite call): the first answer waited 0.09 s for 5 ms of work (issue 49). A miss is counted as
    the parse begins."""
    seen = "__import__('core.hostnames').hostnames.public_suffixes.cache_info().misses"
    assert at_the_first_answer(tmp_path, seen) == (0, "200 0")
