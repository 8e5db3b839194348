"""Scale benchmarks: the domain query at 10k, 100k and 1M domains, a cursor walk, bulk create, GET by
key against a bare Tornado handler (wrk and the Python load generator), RSS and start-up time; on
SQLite, ``q`` again at the largest size on a copy never analysed.
Prints JSON (one object) for bench/run; asserts nothing. Not part of the test run.

    python bench/scale.py [--sizes 10000,100000,1000000] [--seconds 5] [--connections 16]
                          [--backend sqlite|postgresql|both] [--launches N] [--only startup]

Start-up is timed to listening and to the first answer, a GET of a domain by API key (answered
200); RSS is read at the end of the mixed run (queries, walk, ``q``, bulk, GETs), with its peak.
Each backend's figures come with ``pace_ms_before`` and ``pace_ms_after``: the CPU time of a fixed
Python loop (``machine_pace_ms``), which tells at what speed the shared machine ran them.

Each size is a database seeded once and kept under ``~/.cache/cps-bench`` (keyed by size and
schema version), so later runs start at once: one workspace of that many domains. On SQLite it is
grown as the service writes (``grow``): bulk creates of 500 through the function behind
POST /v1/domains/bulk, tags per request and statuses varied as in bench/domains.py, with the
service's statistics upkeep and WAL checkpoints running. On PostgreSQL the rows are written as bulk
creates write them (``store.domains.insert_new``, 500 a transaction, then ``optimize_if_grown``),
into a database of a cluster kept between runs (bench/pg.py) that nobody vacuums or analyses by
hand, and each measurement runs on a copy of it, as SQLite's runs on a copy of its file. The real service
(``python app.py``) is started on each database; wrk runs on core 1.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import pg
from bench.domains import BARE, load, start
from bench.scale_seed import seed
from store.sqlite.schema import MIGRATIONS

CACHE = pg.CACHE
FILTERED = {"certStatus": "active", "tags": ["vip"]}
PAGE = 100


def text_terms(size: int) -> dict[str, str]:
    """``q`` as issue 26 measured it: a word in about 1,003 hostnames at 1M (every 997th), one
    exact hostname, a tag on a third of the rows (each row has 2 of 6), and nothing."""
    middle = size // 2
    return {"word": "customer42.", "hostname": f"host{middle}.customer{middle % 997}.com", "tag": "trial",
            "nothing": "zq-no-such-text"}


def index_mb(database: Path) -> float:
    """The size of the free-text index (its segments and their index), read from a copy."""
    db = sqlite3.connect(database)
    try:
        data, idx = (db.execute(f"SELECT coalesce(sum(length({c})), 0) FROM {t}").fetchone()[0]
                     for t, c in (("domain_text_data", "block"), ("domain_text_idx", "term")))
        return (data + idx) / 1e6
    finally:
        db.close()


def serve(folder: Path, port: int, url: str = "", wrapper: tuple[str, ...] = (),
          probe: tuple[str, str] | None = None) -> tuple[subprocess.Popen, float, float]:
    """The service on the database (the PostgreSQL one at ``url``, if given); seconds from launch
    until its port accepts connections, and until it has answered a first request (the port is
    bound before the service's modules are imported and the database is opened). ``probe``, a path
    and an API key: that first request is a GET of it by the key, answered 200, as a client's
    first call after a restart is; without it, a GET with no credentials (a 401). ``wrapper``
    runs it under another program (bench/instructions.py: valgrind)."""
    config = folder / "service.toml"
    config.write_text(
        f'[server]\nport = {port}\n[storage]\npath = "{folder / "service.sqlite3"}"\nsecret_key_file = "{folder / "secret.key"}"\n'
        + (f'url = "{url}"\n[oidc]\nissuer = "{pg.OIDC["issuer"]}"\nclient_id = "{pg.OIDC["client_id"]}"\n' if url else "") +
        "[rate_limits]\napi = 100000000\n"
        # The API alone is measured: the seeded domains would all be due for a background check.
        "[lifecycle]\nenabled = false\n"
    )
    path, headers = (probe[0], {"Authorization": f"Bearer {probe[1]}"}) if probe else ("/v1/domains/none", {})
    launched = time.perf_counter()
    process = subprocess.Popen([*wrapper, sys.executable, str(ROOT / "app.py"), "--config", str(config)], cwd=folder,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            listening = time.perf_counter() - launched
            first = http.client.HTTPConnection("127.0.0.1", port, timeout=300 if wrapper else 30)
            first.request("GET", path, headers=headers)
            response = first.getresponse()
            response.read()
            first.close()
            if probe and response.status != 200:
                raise RuntimeError(f"the first GET by key was answered {response.status}")
            return process, listening, time.perf_counter() - launched
        except OSError:
            if process.poll() is not None or time.perf_counter() - launched > (300 if wrapper else 30):
                raise RuntimeError("the service did not start") from None
            time.sleep(0.002)


class Client:
    """One keep-alive connection, as an API client keeps one. A call is timed to its answer's last
    byte: parsing the JSON is the client's own work, not the service's (0.35 ms for a page of 100
    domains, about 2 ms for the 500 of a bulk create, on this machine)."""

    def __init__(self, port: int, key: str) -> None:
        self.http = http.client.HTTPConnection("127.0.0.1", port)
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: object = None) -> tuple[float, dict]:
        started = time.perf_counter()
        self.http.request(method, path, body=None if body is None else json.dumps(body), headers=self.headers)
        response = self.http.getresponse()
        answer = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        payload = json.loads(answer or b"null")
        assert response.status < 300, (response.status, payload)
        return elapsed, payload

    def p50(self, body: dict, runs: int = 60) -> float:
        for _ in range(5):
            self.call("POST", "/v1/domains/query", body)
        return statistics.median(self.call("POST", "/v1/domains/query", body)[0] for _ in range(runs))

    def walk(self, pages: int, rounds: int = 3) -> float:
        """Median of ``rounds`` walks, each through pages none has read before (the first from the start)."""
        cursor, times = None, []
        for _ in range(rounds):
            started = time.perf_counter()
            for _ in range(pages):
                body = {"page": {"limit": PAGE, **({"cursor": cursor} if cursor else {})}}
                cursor = self.call("POST", "/v1/domains/query", body)[1]["nextCursor"]
            times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)

    def bulk(self, size: int, rounds: int = 5) -> float:
        """Median of ``rounds`` bulk creates of ``size`` new hostnames."""
        return statistics.median(
            self.call("POST", "/v1/domains/bulk", {"apexList": [f"bulk{r}x{n}.scale-bench.com" for n in range(size)]})[0]
            for r in range(rounds)
        )


def machine_pace_ms() -> float:
    """CPU milliseconds of a fixed pure-Python loop, the best of three: on a shared VM the same code
    ran at two speeds about 2 x apart, changing within minutes. Printed beside the figures so a
    reader can tell which a run had (about 75 ms at the faster on the machine of issue 49)."""
    def once() -> float:
        started, total = time.process_time(), 0
        for n in range(2_000_000):
            total += n
        return (time.process_time() - started) * 1000
    return round(min(once() for _ in range(3)), 1)


def rss_mb(process: subprocess.Popen, field: str = "VmRSS") -> float:
    """The service's resident memory now (``VmHWM``: its peak)."""
    status = Path(f"/proc/{process.pid}/status").read_text()
    return int(re.search(field + r":\s+(\d+) kB", status).group(1)) / 1024


def wrk(port: int, path: str, key: str, seconds: float, connections: int) -> float | None:
    if shutil.which("wrk") is None:
        return None
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s",
                          "-H", f"Authorization: Bearer {key}", f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


#: Service processes GET by key is measured on. On a shared VM, two processes of the same code
#: differ by up to 7 points against the bare handler for as long as they run (memory layout,
#: neighbours); the median of three says more than any one.
GET_PROCESSES = 3


def get_vs_bare(folder: Path, facts: dict, seconds: float, connections: int, url: str = "") -> dict:
    """GET one domain by key, against a bare Tornado handler serving the same bytes: each tool's
    requests per second, the median over ``GET_PROCESSES`` service processes, the bare handler
    measured before each of them."""
    path = f"/v1/domains/{facts['domain']}"
    runs: dict[str, list[float]] = {}
    bare = None
    try:
        for _ in range(GET_PROCESSES):
            service, _, _ = serve(folder, 18601, url)
            try:
                if bare is None:
                    body = Client(18601, facts["key"]).http
                    body.request("GET", path, headers={"Authorization": f"Bearer {facts['key']}"})
                    payload = folder / "bare.json"
                    payload.write_bytes(body.getresponse().read())
                    script = folder / "bare.py"
                    script.write_text(BARE)
                    bare = start([sys.executable, str(script), "18602", str(payload)], "listening", folder / "bare.log")
                for name, port in (("bare", 18602), ("service", 18601)):
                    figure = wrk(port, path, facts["key"], seconds, connections)
                    if figure is not None:
                        runs.setdefault(f"wrk_{name}", []).append(figure)
                    runs.setdefault(f"python_{name}", []).append(
                        asyncio.run(load(port, path, facts["key"], seconds, connections)))
            finally:
                service.terminate()
                service.wait()
    finally:
        if bare is not None:
            bare.terminate()
    result = {f"{tool}_{name}": None for tool in ("wrk", "python") for name in ("service", "bare")}
    result.update({key: statistics.median(figures) for key, figures in runs.items()})
    return result


def measure(client: Client, size: int) -> dict:
    """The query, the cursor walk, ``q`` and bulk create, on a running service."""
    figures = {
        "first_page_p50_ms": client.p50({"page": {"limit": PAGE}}),
        "filtered_page_p50_ms": client.p50({**FILTERED, "page": {"limit": PAGE}}),
        "walk_20_pages_ms": client.walk(20),
    }
    for name, term in text_terms(size).items():
        # The first ask counts the matches; later pages of the same ``q`` reuse the total until the
        # database changes (store/kept_totals.py), so the p50 is mostly theirs.
        figures[f"q_{name}_first_ms"] = client.call("POST", "/v1/domains/query", {"q": term, "page": {"limit": PAGE}})[0]
        figures[f"q_{name}_p50_ms"] = client.p50({"q": term, "page": {"limit": PAGE}}, runs=20)
        figures[f"q_{name}_total"] = client.call("POST", "/v1/domains/query", {"q": term})[1]["total"]
    return figures


def q_unanalysed(folder: Path, facts: dict, size: int) -> dict:
    """``q`` on a copy of the database that was never analysed (no ``sqlite_stat1``), as one grown
    by use or copied in is: SQLite gathers no statistics by itself, and the service must not need
    an operator's ANALYZE (issue 41)."""
    work = Path(tempfile.mkdtemp(prefix="cps-scale-"))
    try:
        for name in ("secret.key", "dev-idp-key.json", "service.sqlite3"):
            if (folder / name).exists():
                shutil.copy(folder / name, work / name)
        db = sqlite3.connect(work / "service.sqlite3")
        db.execute("DROP TABLE IF EXISTS sqlite_stat1")
        db.close()
        os.sync()
        process, _, _ = serve(work, 18600)
        try:
            client = Client(18600, facts["key"])
            return {f"q_{name}_unanalysed_p50_ms": client.p50({"q": term, "page": {"limit": PAGE}}, runs=20)
                    for name, term in text_terms(size).items()}
        finally:
            process.terminate()
            process.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_backend(server: pg.BenchPostgres | None, sizes: list[int], schema: int, args: argparse.Namespace) -> dict:
    """Every size on one backend (PostgreSQL on ``server``, else SQLite), then GET by key on the largest."""
    results: dict = {"sizes": {}, "pace_ms_before": machine_pace_ms()}
    for size in sizes:
        database = f"scale_v{schema}_{size}"
        folder = CACHE / (f"pg-v{schema}-{size}" if server else f"bulk-v{schema}-{size}")
        facts = seed(folder, size, server, database)
        work = Path(tempfile.mkdtemp(prefix="cps-scale-"))
        url = ""
        try:
            # Everything a restarted deployment finds in its folder: without the built-in identity
            # provider's key, each start would make a new RSA key (0.1 s) and start-up would time that.
            for name in ("secret.key", "dev-idp-key.json", *([] if server else ["service.sqlite3"])):
                if (folder / name).exists():  # no built-in identity provider on PostgreSQL
                    shutil.copy(folder / name, work / name)
            if server is not None:
                url = server.copy_of(database, f"work_{size}")
            # The copy (1.8 GB at 1M) is written back to disk in the background for seconds after:
            # measured during that, every read the service makes waits behind the writes.
            os.sync()
            probe = (f"/v1/domains/{facts['domain']}", facts["key"])
            process, startup, answering = serve(work, 18600, url, probe=probe)
            try:
                client = Client(18600, facts["key"])
                figures = {"startup_s": startup, "first_answer_s": answering, **measure(client, size)}
                figures["text_index_mb"] = pg.text_index_mb(url) if url else index_mb(work / "service.sqlite3")
                figures["bulk_500_ms"] = client.bulk(500)
                for _ in range(200):  # and GETs by key: the mixed run's end, where its RSS is read
                    client.call("GET", probe[0])
                figures["rss_mb"], figures["rss_peak_mb"] = rss_mb(process), rss_mb(process, "VmHWM")
                results["sizes"][str(size)] = figures
            finally:
                process.terminate()
                process.wait()
            if size == sizes[-1] and args.launches > 1:
                # Start-up again on the same copy, as a deployment restarts: the median of all launches.
                launches = [(startup, answering)]
                for _ in range(args.launches - 1):
                    process, *times = serve(work, 18600, url, probe=probe)
                    process.terminate()
                    process.wait()
                    launches.append((times[0], times[1]))
                figures["startup_s"], figures["first_answer_s"] = (statistics.median(t) for t in zip(*launches))
                figures["first_answer_runs_s"] = [round(t[1], 3) for t in launches]
            if size == sizes[-1] and args.only != "startup":
                results["get"] = get_vs_bare(work, facts, args.seconds, args.connections, url)
                if server is None:
                    results["sizes"][str(size)].update(q_unanalysed(folder, facts, size))
        finally:
            shutil.rmtree(work, ignore_errors=True)
            if server is not None:
                server.drop_database(f"work_{size}")
    results["pace_ms_after"] = machine_pace_ms()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--launches", type=int, default=1,
                        help="start the service this many times on the largest size: the median start-up")
    parser.add_argument("--only", choices=["startup"],
                        help="startup: leave out GET by key against bare Tornado and q never analysed")
    args = parser.parse_args()
    schema = max(number for number, *_ in MIGRATIONS)
    # Start-up is measured as a deployment starts: with the service's modules compiled, as Python
    # leaves them after its first run, and its dependencies compiled, as ``pip install`` leaves
    # them. uv (.ci/run's installer) compiles nothing, and where PYTHONDONTWRITEBYTECODE is set
    # (some containers) Python never writes what it compiled: every launch then compiled some 165
    # modules of the dependencies again, 0.28 s of a 0.6 s launch to the first answer.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "app.py", "core", "handlers", "store"], cwd=ROOT,
                   check=True, stdout=subprocess.DEVNULL)
    packages = sorted({sysconfig.get_paths()[name] for name in ("purelib", "platlib")})
    # Not checked: a file pip could not compile either (a test fixture's old syntax) stays source.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", *packages], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict = {"backends": {}}
    if args.backend in ("sqlite", "both"):
        results["backends"]["sqlite"] = run_backend(None, sizes, schema, args)
    if args.backend in ("postgresql", "both"):
        server = pg.BenchPostgres(pg.cluster_folder()).start()
        try:
            server.drop_stale(current=f"scale_v{schema}_")
            results["backends"]["postgresql"] = run_backend(server, sizes, schema, args)
            results["postgresql"] = pg.describe()
        finally:
            server.stop()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
