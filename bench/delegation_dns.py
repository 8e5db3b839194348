"""The delegation zone's built-in authoritative server under load: answers per second and the p50
and p99 latency of TXT queries at live challenge names. Prints numbers, asserts nothing; not part
of the test run.

    python bench/delegation_dns.py [--names 1000] [--seconds 5] [--backend sqlite|postgresql|both]

The server (core/delegation_dns/server.py) runs in this process, pinned to core 0, on a store
holding ``--names`` challenge names with one value each (a fresh SQLite file, or a new database on
bench/pg.py's PostgreSQL cluster), every query read from the store as in service. The load comes
from another process, on core 1: ``dnsperf`` (Debian package dnsperf), each query's latency from
its ``-v`` lines, over UDP with 1, 10 and 100 queries outstanding and over TCP with 10; without
dnsperf, a loop of our own (dnspython, asyncio), which is itself slower than the server: its
numbers are the loop's as much as the server's. With one query outstanding, dnsperf paces itself
well below what the server takes: read that row for the latency of a query alone. Also printed:
the server process's CPU per 1,000 answers (its worker threads included, on PostgreSQL).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dns.asyncquery
import dns.message
import dns.rcode

from bench import pg
from core.clock import SystemClock
from core.config import DelegationDnsConfig
from core.delegation_dns.server import DelegationServer
from core.delegation_dns.sockets import bind
from store import Store
from tests.servers.service import free_port

ZONE = "acme.bench.example"
#: (transport, queries outstanding) of each run.
RUNS = [("udp", 1), ("udp", 10), ("udp", 100), ("tcp", 10)]


def seed(store: Store, count: int) -> list[str]:
    """``count`` live challenge names, one value each: the names."""
    names = [f"{uuid.uuid4().hex[:16]}.{ZONE}" for _ in range(count)]
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with store.transaction():
        for name in names:
            store.delegation_zone.publish(name, "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0", expires, expires)
    return names


def loader_command(port: int, names_file: Path, transport: str, outstanding: int, seconds: float) -> list[str]:
    if shutil.which("dnsperf"):
        return ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(names_file), "-m", transport,
                "-l", str(seconds), "-q", str(outstanding), "-c", str(min(outstanding, 8)), "-T", "1", "-v"]
    return [sys.executable, __file__, "--load", str(port), str(names_file), transport, str(outstanding), str(seconds)]


def parse(output: str) -> tuple[list[float], int]:
    """Latencies (seconds) of the answers, and the queries not answered NOERROR, from dnsperf's
    ``-v`` lines (``> NOERROR name TXT 0.000123``), which the loop of our own prints too."""
    latencies, failed = [], 0
    for line in output.splitlines():
        if line.startswith("> "):
            parts = line.split()
            latencies.append(float(parts[-1]))
            failed += parts[1] != "NOERROR"
    lost = next((int(line.split()[2]) for line in output.splitlines() if line.strip().startswith("Queries lost:")), 0)
    return latencies, failed + lost


async def measure(store: Store, names: list[str], folder: Path, seconds: float, cpu: int) -> list[dict]:
    port = free_port()
    config = DelegationDnsConfig(zone=ZONE, nameservers=["ns1.bench.example"], listen=f"127.0.0.1:{port}")
    server = DelegationServer(config, store, SystemClock(), bind(config.listen))
    await server.start()
    names_file = folder / "queries.txt"
    names_file.write_text("".join(f"{name} TXT\n" for name in names))
    results = []
    try:
        for transport, outstanding in RUNS:
            before, started = time.process_time(), time.perf_counter()
            loader = await asyncio.create_subprocess_exec(
                *loader_command(port, names_file, transport, outstanding, seconds), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if cpu >= 0 else None)
            output, _ = await loader.communicate()
            wall, used = time.perf_counter() - started, time.process_time() - before
            latencies, failed = parse(output.decode())
            quantiles = statistics.quantiles(latencies, n=100)
            results.append({"transport": transport, "outstanding": outstanding, "answers": len(latencies),
                            "per_second": len(latencies) / seconds, "p50_ms": quantiles[49] * 1000,
                            "p99_ms": quantiles[98] * 1000, "failed": failed,
                            "cpu_ms_per_1000": used / max(len(latencies), 1) * 1e6, "wall": wall})
    finally:
        await server.stop()
    return results


def report(backend: str, results: list[dict], names: int) -> None:
    tool = "dnsperf" if shutil.which("dnsperf") else "a loop of our own (dnspython)"
    print(f"== {backend} == {names:,} live challenge names, TXT queries from {tool}")
    print(f"{'transport, outstanding':<24} {'answers/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'failed':>7} "
          f"{'server CPU ms / 1,000':>22}")
    for r in results:
        print(f"{r['transport'].upper() + ', ' + str(r['outstanding']):<24} {r['per_second']:>10,.0f} {r['p50_ms']:>8.2f} "
              f"{r['p99_ms']:>8.2f} {r['failed']:>7} {r['cpu_ms_per_1000']:>22,.0f}")


async def load(port: int, names_file: Path, transport: str, outstanding: int, seconds: float) -> None:
    """The loop of our own, printing dnsperf's ``-v`` lines."""
    names = [line.split()[0] for line in names_file.read_text().splitlines()]
    ask = dns.asyncquery.udp if transport == "udp" else dns.asyncquery.tcp
    deadline = time.perf_counter() + seconds
    lines: list[str] = []

    async def client(n: int) -> None:
        while time.perf_counter() < deadline:
            name = names[n % len(names)]
            started = time.perf_counter()
            answer = await ask(dns.message.make_query(name, "TXT"), "127.0.0.1", port=port, timeout=2)
            lines.append(f"> {dns.rcode.to_text(answer.rcode())} {name} TXT {time.perf_counter() - started:.6f}")
            n += outstanding

    await asyncio.gather(*(client(n) for n in range(outstanding)))
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--names", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="sqlite")
    parser.add_argument("--load", nargs=5, metavar=("PORT", "FILE", "TRANSPORT", "OUTSTANDING", "SECONDS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        port, names_file, transport, outstanding, seconds = args.load
        asyncio.run(load(int(port), Path(names_file), transport, int(outstanding), float(seconds)))
        return
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    # Started before this process pins itself to its core: the server would inherit that.
    postgres = pg.BenchPostgres(pg.cluster_folder()).start() if "postgresql" in backends else None
    cpu = -1
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {0})
        cpu = 1
    folder = Path(tempfile.mkdtemp(prefix="bench-delegation-dns-"))
    try:
        for backend in backends:
            url = postgres.create_database(f"work_dns_{uuid.uuid4().hex[:8]}") if postgres and backend == "postgresql" else ""
            store = Store(url=url) if url else Store(folder / "db.sqlite3")
            try:
                names = seed(store, args.names)
                results = asyncio.run(measure(store, names, folder, args.seconds, cpu))
            finally:
                store.close()
                if postgres is not None and url:
                    postgres.drop_database(url.rsplit("/", 1)[1])
            report(backend, results, args.names)
            print(json.dumps(results), file=sys.stderr)
    finally:
        if postgres is not None:
            postgres.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
