"""The delegation zone's built-in authoritative server against NSD and Knot (issue 47, "Measured and
shown"). Prints numbers, asserts nothing; not part of the test run.

    python bench/delegation_dns.py [--names 1000] [--seconds 3] [--rounds 3] [--flood-seconds 10]
                                   [--writes 50] [--backend sqlite|postgresql] [--only speed,flood,primary]

Each server runs on core 0 (``taskset``), each load on core 1, this process on core 1 too. Printed,
with the 1-minute load average (``os.getloadavg``) beside each figure:

1. **Speed.** The built-in server (``core/delegation_dns/server.py``, in a process of its own that
   does nothing else, its store a fresh SQLite file or a database on bench/pg.py's cluster), NSD and
   Knot, each serving the same zone: ``--names`` TXT names one label under it, one value each. The
   load is ``dnsperf`` over UDP, the names in turn, with 10 and then 100 queries outstanding,
   ``--seconds`` a run, the three servers interleaved, ``--rounds`` rounds: the median round's
   answers per second, the p50 and p99 latency of its answers (dnsperf's ``-v`` lines), and the
   server's CPU per answer (utime + stime of its processes and their threads, from
   ``/proc/<pid>/stat``, over the run), then the built-in's share of NSD's answers per second and its
   CPU per answer over NSD's. Also dnsperf's own CPU, as a share of its core: near 100 %, the load
   is the limit, and NSD's and Knot's figures are lower bounds (so the built-in's share of them an
   upper bound). Response-rate limiting is off in all three for these runs: one source asks
   everything.
2. **Flood.** The service itself (``python app.py``, ``[provider] kind = "acme"``, its delegation
   zone holding the same names), for ``--flood-seconds`` idle and then as long again while
   ``dnsperf`` from 127.0.0.1 asks random names (NXDOMAIN) at 5,000/s, never waiting for answers
   (``-q 20000 -t 1``). Throughout both windows a "resolver" from another prefix (127.0.1.1) asks
   the real names at 100/s, not held back by the ones unanswered (up to 400 outstanding): the share
   of its queries answered (within 2 s) and their p50/p99; and an
   API client asks ``GET /v1/domains/:id`` (one domain) with an API key 20 times a second over one keep-alive
   connection: its p50/p99, idle and during the flood (the built-in server shares the service's
   event loop with the API).
3. **Hidden primary.** When ``[delegation_dns]`` has ``secondaries`` (issue 47 item 4), NSD and Knot
   as secondaries of the built-in server (AXFR/IXFR with TSIG, kept by NOTIFY): ``--writes`` values
   published one after another through ``core/delegation_dns/records.StoredRecords``, each timed from
   the write until both secondaries answer it: p50 and p99. Without the feature, a line says so.

Needs ``nsd``, ``knotd``, ``dnsperf`` and ``taskset`` (Debian packages nsd, knot, dnsperf,
util-linux). The whole run takes about two minutes with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import re
import shutil
import signal
import statistics
import string
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from bench import certificates, pg
from bench.dns_hidden_primary import hidden_primary
from bench.dns_servers import (
    NAMESERVERS,
    NO_RATE_LIMIT,
    PATIENCE,
    SERVER_CORE,
    VALUE,
    ZONE,
    Server,
    answers,
    builtin_config,
    cpu_seconds,
    load,
    make_server,
    open_store,
    pct,
    pinned,
    seed,
    start_builtin,
    start_knot,
    start_nsd,
)
from store import Store
from tests.servers.service import free_port

OUTSTANDING = (10, 100)
SERVERS = ("built-in", "NSD", "Knot")
LOAD_CORE = 1
FLOOD_RATE, RESOLVER_RATE, API_RATE = 5000, 100, 20
RESOLVER, FLOODER = "127.0.1.1", "127.0.0.1"


# ---------------------------------------------------------------------------------------------------------------
# The built-in server alone in this process (``--serve``)


async def serve(port: int, where: str) -> None:
    """``--serve``: the built-in server alone in this process until SIGTERM (its speed run)."""
    store = open_store(where)
    server = make_server(builtin_config(f"127.0.0.1:{port}", **NO_RATE_LIMIT), store)
    await server.start()
    stopped = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)
    print("ready", flush=True)
    try:
        await stopped.wait()
    finally:
        await server.stop()
        store.close()


# ---------------------------------------------------------------------------------------------------------------
# The load


def dnsperf(port: int, names_file: Path, out: Path, seconds: float, outstanding: int, *more: str) -> subprocess.Popen:
    """dnsperf on the load core, every answer's line (``-v``) written to ``out``."""
    command = ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(names_file), "-l", str(seconds),
               "-q", str(outstanding), "-c", str(min(outstanding, 8)), "-T", "1", "-v", *more]
    with open(out, "wb") as output:
        return subprocess.Popen(pinned(LOAD_CORE, command), stdout=output, stderr=subprocess.STDOUT)


def parsed(out: Path) -> dict:
    """Latencies (seconds) of the answers dnsperf's ``-v`` lines report (``> NOERROR name TXT
    0.000123``), and its counts of queries sent, completed and lost."""
    text = out.read_text()
    # A query timed out: ``> T name TXT``.
    latencies = [float(line.rsplit(None, 1)[1]) for line in text.splitlines()
                 if line.startswith("> ") and not line.startswith("> T ")]
    count = {key: int(found.group(1)) if (found := re.search(rf"Queries {key}:\s+(\d+)", text)) else 0
             for key in ("sent", "completed", "lost")}
    return {"latencies": latencies, **count}


def speed_run(server: Server, names_file: Path, outstanding: int, seconds: float, folder: Path) -> dict:
    out = folder / "dnsperf.out"
    loadavg, cpu_before = load(), cpu_seconds(server.process.pid)
    loader = dnsperf(server.port, names_file, out, seconds, outstanding)
    _, _, usage = os.wait4(loader.pid, 0)
    loader.returncode = 0  # reaped here, for its CPU time
    cpu = cpu_seconds(server.process.pid) - cpu_before
    result = parsed(out)
    latencies = result["latencies"]
    return {"per_second": len(latencies) / seconds, "p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99),
            "cpu_us": cpu / max(len(latencies), 1) * 1e6, "lost": result["lost"], "load": loadavg,
            "dnsperf_cpu": (usage.ru_utime + usage.ru_stime) / seconds}


def speed(folder: Path, names: list[str], where: str, seconds: float, rounds: int) -> None:
    names_file = folder / "queries.txt"
    names_file.write_text("".join(f"{name} TXT\n" for name in names))
    servers = {"built-in": start_builtin(folder, where), "NSD": start_nsd(folder, names), "Knot": start_knot(folder, names)}
    runs: dict[tuple[str, int], list[dict]] = {}
    try:
        for name, server in servers.items():  # every name answered once before the runs
            server.wait_for(names[-1], "TXT", VALUE)
        for _ in range(rounds):
            for outstanding in OUTSTANDING:
                for name, server in servers.items():
                    runs.setdefault((name, outstanding), []).append(
                        speed_run(server, names_file, outstanding, seconds, folder))
    finally:
        for server in servers.values():
            server.stop()
    print(f"== speed == {len(names):,} TXT names, dnsperf over UDP, {seconds:g} s a run, the three servers interleaved, "
          f"median of {rounds} rounds (the load average beside each figure: the 1-minute one as its run began)")
    print(f"{'server, outstanding':<22} {'answers/s':>18} {'p50 ms':>15} {'p99 ms':>15} {'CPU µs / answer':>18} {'lost':>6}")
    medians: dict[tuple[str, int], dict] = {}
    for (name, outstanding), results in runs.items():
        row = medians[name, outstanding] = {key: statistics.median(r[key] for r in results) for key in results[0]}
        # The load beside each figure: that of the run whose figure is the median (the nearest).
        cells = []
        for key, width, form in (("per_second", 18, ",.0f"), ("p50", 15, ".2f"), ("p99", 15, ".2f"), ("cpu_us", 18, ",.1f")):
            nearest = min(results, key=lambda r: abs(r[key] - row[key]))
            text = f"{format(row[key], form)} ({nearest['load']:.2f})"
            cells.append(f"{text:>{width}}")
        print(f"{name + ', ' + str(outstanding):<22} {' '.join(cells)} {row['lost']:>6.0f} {row['dnsperf_cpu']:>12.0%}")
    for outstanding in OUTSTANDING:
        ours, nsd, knot = (medians[name, outstanding] for name in SERVERS)
        print(f"built-in / NSD at {outstanding:>3} outstanding: answers/s {ours['per_second'] / nsd['per_second']:.1%}, "
              f"CPU per answer {ours['cpu_us'] / nsd['cpu_us']:.1f} x; / Knot: answers/s "
              f"{ours['per_second'] / knot['per_second']:.1%}, CPU per answer {ours['cpu_us'] / knot['cpu_us']:.1f} x")


# ---------------------------------------------------------------------------------------------------------------
# The flood


def service_config(folder: Path, dns_port: int) -> Path:
    """The service with the ACME provider (a CA it never asks here) and the delegation zone on
    ``dns_port``; loopback, port 0, the built-in identity provider, no API rate limit in the way."""
    path = folder / "service.toml"
    path.write_text(
        f'[server]\nhost = "127.0.0.1"\nport = 0\nbase_url = "http://127.0.0.1:8080"\n'
        f'[storage]\npath = "{folder / "service.sqlite3"}"\nsecret_key_file = "{folder / "secret.key"}"\n'
        '[dns]\nnameservers = ["127.0.0.1:9"]\ntimeout_seconds = 0.5\n'
        "[rate_limits]\napi = 10000000\n"
        '[provider]\nkind = "acme"\n[provider.acme]\ndirectory_url = "https://acme.invalid/directory"\n'
        f'[delegation_dns]\nzone = "{ZONE}"\nnameservers = ["{NAMESERVERS[0]}", "{NAMESERVERS[1]}"]\n'
        f'listen = "127.0.0.1:{dns_port}"\n'
    )
    return path


def prepare_service(config: Path, count: int) -> tuple[list[str], str, str]:
    """The service's database with ``count`` live challenge names and a workspace with one domain
    and an API key: the names, the key, the domain's API path."""
    token, rows = asyncio.run(certificates.seed(config, ["www.shop-bench.com"], verified=False))
    store = Store(config.parent / "service.sqlite3")
    try:
        return seed(store, count), token, f"/v1/domains/{rows[0].id}"
    finally:
        store.close()


def start_service(folder: Path, config: Path) -> tuple[subprocess.Popen, int]:
    """``python app.py`` on the server core, and its HTTP port."""
    log = folder / "service.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(pinned(SERVER_CORE, [sys.executable, "app.py", "--config", str(config)]),
                                   cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline and process.poll() is None:
        if found := re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read_text()):
            return process, int(found.group(1))
        time.sleep(0.1)
    process.kill()
    process.wait()
    raise RuntimeError(f"the service did not start:\n{log.read_text()[-2000:]}")


async def api_latencies(port: int, token: str, path: str, seconds: float) -> list[float]:
    """``GET path`` every ``1 / API_RATE`` s over one keep-alive connection: each one's seconds."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    latencies = []
    started = time.perf_counter()
    try:
        for n in range(int(seconds * API_RATE)):
            await asyncio.sleep(max(0.0, started + n / API_RATE - time.perf_counter()))
            sent = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
            await reader.readexactly(int(length.group(1)) if length else 0)
            assert head.startswith(b"HTTP/1.1 200"), head
            latencies.append(time.perf_counter() - sent)
    finally:
        writer.close()
    return latencies


async def window(port: int, dns_port: int, token: str, path: str, names_file: Path, flood_file: Path | None, seconds: float,
                 folder: Path) -> dict:
    """``seconds`` of the resolver and the API client, with the flood if ``flood_file``."""
    resolver_out, flood_out = folder / "resolver.out", folder / "flood.out"
    loadavg = load()
    processes = [dnsperf(dns_port, names_file, resolver_out, seconds, 400, "-a", RESOLVER, "-Q", str(RESOLVER_RATE),
                         "-t", "2")]
    if flood_file is not None:
        processes.append(dnsperf(dns_port, flood_file, flood_out, seconds, 20000, "-a", FLOODER, "-Q", str(FLOOD_RATE),
                                 "-t", "1"))
    api = await api_latencies(port, token, path, seconds)
    for process in processes:
        await asyncio.to_thread(process.wait)
    resolver = parsed(resolver_out)
    result = {"load": loadavg, "api": api, "resolver": resolver, "load_after": load()}
    if flood_file is not None:
        result["flood"] = parsed(flood_out)
    return result


def flood(folder: Path, count: int, seconds: float) -> None:
    folder.mkdir()
    dns_port = free_port()
    config = service_config(folder, dns_port)
    names, token, path = prepare_service(config, count)
    names_file = folder / "queries.txt"
    names_file.write_text("".join(f"{name} TXT\n" for name in names))
    flood_file = folder / "random.txt"
    letters = string.ascii_lowercase + string.digits
    flood_file.write_text("".join(f"{''.join(random.choices(letters, k=16))}.{ZONE} TXT\n"
                                  for _ in range(int(FLOOD_RATE * seconds))))
    process, port = start_service(folder, config)
    try:
        deadline = time.monotonic() + PATIENCE
        while not answers(dns_port, names[-1], "TXT", VALUE) and time.monotonic() < deadline:
            time.sleep(0.05)
        asyncio.run(api_latencies(port, token, path, 1))  # warm-up
        cpu = cpu_seconds(process.pid)
        idle = asyncio.run(window(port, dns_port, token, path, names_file, None, seconds, folder))
        idle_cpu, cpu = cpu_seconds(process.pid) - cpu, cpu_seconds(process.pid)
        flooded = asyncio.run(window(port, dns_port, token, path, names_file, flood_file, seconds, folder))
        flooded_cpu = cpu_seconds(process.pid) - cpu
    finally:
        process.terminate()
        process.wait(PATIENCE)
    print(f"\n== flood == the service (python app.py, kind = \"acme\"), {count:,} live names; {seconds:g} s idle, then "
          f"{seconds:g} s of random names from {FLOODER} at {FLOOD_RATE:,}/s; a resolver at {RESOLVER} asking real "
          f"names at {RESOLVER_RATE}/s and GET /v1/domains/:id at {API_RATE}/s throughout (load average in brackets)")
    for label, result, used in (("idle", idle, idle_cpu), ("flood", flooded, flooded_cpu)):
        resolver = result["resolver"]
        answered = resolver["completed"] / max(resolver["sent"], 1)
        print(f"  {label:<6} (load {result['load']:.2f} -> {result['load_after']:.2f}) resolver: {resolver['completed']:,} "
              f"of {resolver['sent']:,} answered ({answered:.1%}), p50 / p99 {pct(resolver['latencies'], .5):.2f} / "
              f"{pct(resolver['latencies'], .99):.2f} ms; API p50 / p99 {pct(result['api'], .5):.2f} / "
              f"{pct(result['api'], .99):.2f} ms ({len(result['api'])} GETs); service CPU {used / seconds:.0%} of a core")
    sent = flooded["flood"]
    print(f"  the flood: {sent['sent']:,} queries sent, {sent['completed']:,} answered "
          f"({sent['completed'] / max(sent['sent'], 1):.1%})")
    idle_p99, flood_p99 = pct(idle["api"], .99), pct(flooded["api"], .99)
    print(f"  API p99 during the flood / idle: {flood_p99 / max(idle_p99, 1e-9):.2f} x")


# ---------------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--names", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flood-seconds", type=float, default=10.0)
    parser.add_argument("--writes", type=int, default=50)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--only", default="speed,flood,primary")
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the seeding services' start-up warnings are noise here
    if args.serve:
        asyncio.run(serve(int(args.serve[0]), args.serve[1]))
        return
    missing = [tool for tool in ("nsd", "knotd", "dnsperf") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"needs {', '.join(missing)} (Debian packages nsd, knot, dnsperf)")
    parts = set(args.only.split(","))
    # Started before this process moves to the load core: the cluster would inherit that.
    postgres = pg.BenchPostgres(pg.cluster_folder()).start() if args.backend == "postgresql" else None
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {LOAD_CORE})
    folder = Path(tempfile.mkdtemp(prefix="bench-delegation-dns-"))
    started = time.monotonic()
    try:
        def stored(part: Callable[[str], None]) -> None:
            """``part`` on a fresh store: its SQLite file or PostgreSQL URL."""
            url = postgres.create_database(f"work_dns_{uuid.uuid4().hex[:8]}") if postgres else ""
            try:
                part(url or str(folder / f"{uuid.uuid4().hex[:8]}.sqlite3"))
            finally:
                if postgres is not None and url:
                    postgres.drop_database(url.rsplit("/", 1)[1])

        if "speed" in parts:
            def run_speed(where: str) -> None:
                store = open_store(where)
                try:
                    names = seed(store, args.names)
                finally:
                    store.close()
                speed(folder, names, where, args.seconds, args.rounds)

            stored(run_speed)
        if "flood" in parts:
            flood(folder / "flood", args.names, args.flood_seconds)
        if "primary" in parts:
            stored(lambda where: asyncio.run(hidden_primary(folder / "primary", where, args.writes)))
        print(f"\n(whole run {time.monotonic() - started:.0f} s; built-in store: {args.backend})")
    finally:
        if postgres is not None:
            postgres.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
