"""Webhook delivery benchmark: prints numbers, asserts nothing. Not part of the test run.

    python bench/webhooks.py [--events 2000] [--concurrency 32] [--profile FILE]
                             [--backend sqlite|postgresql|both]

A child process (``python -c``, core 0) runs the HTTPS receiver (tests/servers/https.py, 200 at
once, trustme CA) and the DNS server (tests/servers/dns.py) answering its name with 127.0.0.1: DNS
stands for a remote resolver, and its thread-per-query dnslib server would take the GIL and the
core from the sender. This process (core 1) is the sender: the service's own ``Services`` from a
config file (SQLite in a temp dir, or a new database on bench/pg.py's PostgreSQL cluster; that DNS
server, ``127.0.0.0/8`` allowed, the receiver's CA trusted, the real clock), a workspace and an
endpoint made by core code, ``--events`` outbox events queued, then:

1. ``await WebhookWorker.tick()`` repeatedly until every delivery is delivered (or no tick makes
   progress), after 64 warm-up deliveries: deliveries/s (events / wall time), failures, p50/p95
   of the attempts' ``duration_ms``, the CPU each process used. ``--concurrency`` sets
   the worker's concurrency and the OutboundClient's pool size for the run.
2. ``WebhookWorker.fan_out()`` of the same events alone (before 1): its wall time.

Target: >= 500 signed deliveries/s, hence <= 2 ms of sender CPU per delivery on one core.
``--profile FILE`` writes cProfile stats of the sender during 1 and prints its top functions.
``--backend both`` (the default) runs it all on SQLite, then on PostgreSQL: a table for each (on
PostgreSQL with the server's CPU per delivery too; a delivery loop that raises is reported as FAILED).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import logging
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import pg
from core.config import load_config
from core.identity import accounts
from core.runtime.assembly import build_services
from core.webhooks import endpoints
from core.webhooks import worker as worker_module
from store.records import OutboxEvent

WARMUP, DEADLINE_SECONDS = 64, 300  # the delivery loop may not run longer than the deadline
MEASURED, WARM = "cert.issue_pending", "cert.issued"  # the type tells measured deliveries from warm-up ones

# The receiver process: pins itself before any thread starts, prints where it listens, then answers
# one line of CPU time and requests received per line on stdin; stops when stdin closes.
CHILD = """
import json, os, sys
if int(sys.argv[1]) >= 0:
    os.sched_setaffinity(0, {int(sys.argv[1])})
sys.path.insert(0, os.getcwd())
from tests.servers.dns import DnsServer
from tests.servers.https import HttpsReceiver
dns, receiver = DnsServer().start(), HttpsReceiver()
try:  # the receiver stops when the bench closes our stdin, or dies
    dns.publish(receiver.hostname, "A", "127.0.0.1")
    print(json.dumps({"url": receiver.url(), "ca": receiver.ca_pem_path, "dns": dns.address}), flush=True)
    for _ in sys.stdin:
        print(json.dumps({"cpu": sum(os.times()[:2]), "received": len(receiver.received)}), flush=True)
finally:
    receiver.stop()
    dns.stop()
"""


def _pin(cpu: int) -> int:
    """This process on ``cpu``; the core to give the receiver (-1: no pinning on this machine)."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        return -1
    os.sched_setaffinity(0, {cpu})
    return 0


def start_receiver(tmp: Path, cpu: int) -> tuple[subprocess.Popen, dict]:
    with open(tmp / "receiver.log", "w") as err:  # its stderr to a file: only read on trouble
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(cpu)], cwd=ROOT, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    line = proc.stdout.readline()
    if not line:
        stop(proc)
        raise RuntimeError(f"the receiver did not start:\n{(tmp / 'receiver.log').read_text()[-2000:]}")
    return proc, json.loads(line)


def ask(proc: subprocess.Popen) -> dict:
    print("?", file=proc.stdin, flush=True)
    return json.loads(proc.stdout.readline())


def stop(proc: subprocess.Popen) -> None:
    try:
        proc.stdin.close()  # the child's cue to stop the receiver and remove its CA folder
        proc.wait(10)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


def write_config(tmp: Path, receiver: dict, url: str) -> Path:
    """The service's configuration: SQLite in ``tmp``, or the PostgreSQL database at ``url``."""
    path = tmp / "service.toml"
    path.write_text(
        f'[server]\nhost = "127.0.0.1"\nport = 0\nbase_url = "http://127.0.0.1:8080"\n'
        f'[storage]\npath = "{tmp / "db.sqlite3"}"\nsecret_key_file = "{tmp / "secret.key"}"\n'
        + (f'url = "{url}"\n[oidc]\nissuer = "{pg.OIDC["issuer"]}"\nclient_id = "{pg.OIDC["client_id"]}"\n' if url else "") +
        f'[dns]\nnameservers = ["{receiver["dns"]}"]\n'
        f'[network]\nallow_private_ranges = ["127.0.0.0/8"]\nca_bundle = "{receiver["ca"]}"\n'
    )
    return path


def queue(services, workspace_id: uuid.UUID, count: int, event_type: str) -> None:
    """``count`` outbox events in one transaction, with the data the certificate code writes (a
    unit of work: ``await store.run(queue, ...)``)."""
    with services.store.transaction():
        for n in range(count):
            data = {"domainId": str(uuid.uuid4()), "apex": f"shop{n}.acme-bench.com", "status": "pending",
                    "certificateId": str(uuid.uuid4()), "provider": "edge_provider_for_saas"}
            event = OutboxEvent(id=uuid.uuid4(), workspace_id=workspace_id, type=event_type, data=data,
                                created_at=services.clock.now())
            services.store.outbox.insert(event)


def fetch(services, sql: str, *params) -> list[tuple]:
    """Rows of a query (a unit of work: ``await store.run(fetch, ...)``)."""
    return [tuple(row) for row in services.store.sql.execute(sql, list(params)).fetchall()]


async def drain(services, worker: worker_module.WebhookWorker) -> None:
    """Ticks until nothing is pending, or a tick made no attempt (failures wait 30 s for a retry)."""
    async def count(sql: str) -> int:
        return (await services.store.run(fetch, services, sql))[0][0]

    while await count("SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'"):
        before = await count("SELECT count(*) FROM webhook_attempts")
        await worker.tick()
        if await count("SELECT count(*) FROM webhook_attempts") == before:
            break


async def run(args, services, proc: subprocess.Popen, receiver: dict, server: pg.BenchPostgres | None) -> dict:
    """The measurement on ``services`` (``server``: the PostgreSQL server they use, for its CPU)."""
    store = services.store
    services.outbound.pool.max_clients = args.concurrency  # read when its HTTP client is made, at first use
    workspace, _ = await store.run(accounts.create_workspace, services, name="bench", owner_email="bench@acme-bench.com")
    webhook = endpoints.CreateWebhook(url=receiver["url"])
    await endpoints.create(services, workspace_id=workspace.id, request=webhook)
    worker = worker_module.WebhookWorker(services, concurrency=args.concurrency)
    await store.run(queue, services, workspace.id, WARMUP, WARM)
    await drain(services, worker)  # warm-up, not counted: first connections, caches, the HTTP client
    await store.run(queue, services, workspace.id, args.events, MEASURED)
    started = time.perf_counter()
    while await store.run(worker.fan_out):  # 500 events a call
        pass
    fan_out = time.perf_counter() - started
    profile = cProfile.Profile() if args.profile else None
    database_before = pg.server_cpu(server) if server else None
    child_before, cpu_before, started = ask(proc), time.process_time(), time.perf_counter()
    failure = None
    with profile or contextlib.nullcontext():
        try:
            await asyncio.wait_for(drain(services, worker), DEADLINE_SECONDS)
        except Exception as exc:  # noqa: BLE001  # shown in the table: this measure failed
            failure = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_before
    child = {key: value - child_before[key] for key, value in ask(proc).items()}
    database_cpu = None if database_before is None else pg.server_cpu(server) - database_before
    attempts = "FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id AND d.type = ?"
    errors = f"SELECT a.error, count(*) {attempts} WHERE a.error IS NOT NULL GROUP BY 1"
    delivered = "SELECT count(*) FROM webhook_deliveries WHERE type = ? AND status = 'delivered'"
    return {
        "wall": wall, "fan_out": fan_out, "sender_cpu": cpu, "profile": profile,
        "receiver_cpu": child["cpu"], "received": child["received"], "database_cpu": database_cpu, "failure": failure,
        "ms": [row[0] for row in await store.run(fetch, services, f"SELECT a.duration_ms {attempts}", MEASURED)],
        "errors": await store.run(fetch, services, errors, MEASURED),
        "delivered": (await store.run(fetch, services, delivered, MEASURED))[0][0],
    }


def report(args, r: dict, backend: str) -> None:
    if r["failure"]:
        print(f"== {backend} ==\nsigned deliveries/s: FAILED, the delivery loop raised {r['failure']}")
        return
    n, rate, ms = args.events, args.events / r["wall"], sorted(r["ms"]) or [float("nan")]
    failed = sum(count for _, count in r["errors"])
    table = [
        (f"signed deliveries/s, loopback HTTPS, concurrency {args.concurrency}", f"{rate:.0f} /s", ">= 500/s",
         "met" if rate >= 500 else f"missed by {500 - rate:.0f}/s ({1 - rate / 500:.0%})"),
        ("  attempt duration p50 / p95", f"{ms[len(ms) // 2]:.0f} / {ms[int(len(ms) * .95)]:.0f} ms", "", ""),
        ("  delivered / failed attempts", f"{r['delivered']} of {n} / {failed}", f"{n} / 0", ""),
        ("  CPU busy: sender / receiver+DNS (one core each)",
         f"{r['sender_cpu'] / r['wall']:.0%} / {r['receiver_cpu'] / r['wall']:.0%}", "", ""),
        ("  sender CPU per delivery", f"{r['sender_cpu'] / n * 1000:.2f} ms", "<= 2 ms", ""),
        *([("  PostgreSQL server CPU per delivery", f"{r['database_cpu'] / n * 1000:.2f} ms", "", "")]
          if r.get("database_cpu") is not None else []),
        (f"fan-out of {n} events (worker.fan_out() alone)", f"{r['fan_out'] * 1000:.0f} ms",
         "", f"{r['fan_out'] / n * 1e6:.0f} us/event"),
        ("  deliveries/s counting the fan-out too", f"{n / (r['wall'] + r['fan_out']):.0f} /s", "", ""),
    ]
    print(f"== {backend} ==" + (f" ({pg.describe()})" if backend == "postgresql" else ""))
    print(f"{'measure':<58} {'result':<18} target")
    for measure, result, target, verdict in table:
        print(f"{measure:<58} {result:<18} {target:<12} {verdict}".rstrip())
    for error, count in r["errors"][:5]:
        print(f"  {count} attempts failed: {error}")
    print(f"({n} events in {r['wall']:.2f} s after {WARMUP} warm-up; {r['received']} requests reached the "
          f"receiver; whole run {r['whole']:.1f} s)")
    if r["profile"]:
        r["profile"].dump_stats(args.profile)
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=worker_module.CONCURRENCY)
    parser.add_argument("--profile", metavar="FILE", help="cProfile stats of the sender's delivery loop")
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # failed attempts are counted below, not logged one by one
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    # Started before this process pins itself to its core: the server would inherit that.
    server = pg.BenchPostgres(pg.cluster_folder()).start() if "postgresql" in backends else None
    receiver_cpu = _pin(1)
    tmp, proc = Path(tempfile.mkdtemp(prefix="bench-webhooks-")), None
    try:
        proc, receiver = start_receiver(tmp, receiver_cpu)
        for backend in backends:
            whole, folder, url = time.perf_counter(), tmp / backend, ""
            folder.mkdir()
            if server is not None and backend == "postgresql":
                url = server.create_database(f"work_webhooks_{uuid.uuid4().hex[:8]}")
            try:
                # Made before the loop runs: on PostgreSQL, opening the store (migrations) there is refused.
                services = build_services(load_config(write_config(folder, receiver, url)))
                try:
                    r = asyncio.run(run(args, services, proc, receiver, server if url else None))
                finally:
                    services.close()
            finally:
                if server is not None and url:
                    server.drop_database(url.rsplit("/", 1)[1])
            r["whole"] = time.perf_counter() - whole
            report(args, r, backend)
    finally:
        if proc is not None:
            stop(proc)
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
