"""Two service processes on one PostgreSQL database under a mixed load, one of them SIGKILLed:
prints numbers, asserts nothing. Not part of the test run.

    python bench/processes.py [--seconds 120] [--rate 150] [--kill-at 60] [--no-kill] [--runs 1]
    python bench/processes.py --creates [--count 2000] [--workspaces 8] [--runs 3]

The mixed load (issue 41, item 2). A new database on bench/pg.py's cluster, two ``python app.py``
processes on it (the background checks off: the API alone is measured), and at once what a real
deployment starts with: an import of ``--import`` domains by bulk requests of 500 (one workspace),
then ``--rate`` requests a second for ``--seconds`` seconds, from 16 keep-alive connections spread
over both processes: GET a domain (45 %), a query (25 %: a word, a status, a page), a PATCH of its
notes (25 %: each connection patches domains of its own, so the last acknowledged value is the one
expected) and a bulk create of 1 to 16 new hostnames (5 %). At ``--kill-at`` seconds one process is
SIGKILLed and started again at once; a connection it refuses meanwhile is made to the other
process, as a proxy in front would. Printed per kind: requests, p50, p99 and 5xx answers; the
requests in flight to the killed process (their connection lost, their fate unknown);
then, read from the database, the acknowledged creates that are missing and the acknowledged
patches whose value is not there (lost writes; target 0), the transactions PostgreSQL rolled back
(serialization failures retried among them) and the load average. Targets: 0 5xx, bulk p99 < 1 s.

``--creates``: ``--count`` single creates (``POST /v1/domains``) at once over 32 connections to
both processes, all into one workspace and then spread over ``--workspaces`` workspaces, on a new
database each, alternately ``--runs`` times: the seconds each took. Target: one workspace about as
fast as several.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import pg
from bench.certificates import pct
from bench.lifecycle import Client
from core.config import Config, OidcConfig, StorageConfig
from core.identity import accounts, api_keys
from core.runtime.assembly import build_services

CONNECTIONS = 16
WEIGHTS = {"get": 45, "query": 25, "patch": 25, "bulk": 5}
QUERIES = [{"q": "imp12"}, {"status": "pending", "page": {"limit": 50}}, {"q": "example", "page": {"limit": 20}},
           {"certStatus": "none", "sort": {"by": "apex", "dir": "asc"}}]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Service:
    """One ``python app.py`` on the database, on a port of its own."""

    def __init__(self, folder: Path, url: str, port: int) -> None:
        self.port, self.log = port, folder / f"service-{port}.log"
        self.config = folder / f"service-{port}.toml"
        self.config.write_text(
            f'[server]\nport = {port}\n[storage]\npath = "{folder / "unused.sqlite3"}"\n'
            f'secret_key_file = "{folder / "secret.key"}"\nurl = "{url}"\n'
            f'[oidc]\nissuer = "{pg.OIDC["issuer"]}"\nclient_id = "{pg.OIDC["client_id"]}"\n'
            "[rate_limits]\napi = 100000000\n[lifecycle]\nenabled = false\n")
        self.process: subprocess.Popen | None = None

    def start(self) -> Service:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--config", str(self.config)],
                                            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while f"127.0.0.1:{self.port}" not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the service did not start:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.02)
        return self

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


def workspaces_with_keys(url: str, folder: Path, count: int) -> list[tuple[str, str]]:
    """``count`` workspaces, each with a ``*`` API key: (workspace id, key)."""
    config = Config(storage=StorageConfig(path=str(folder / "unused.sqlite3"), url=url,
                                          secret_key_file=str(folder / "secret.key")), oidc=OidcConfig(**pg.OIDC))
    services = build_services(config)
    try:
        made = []
        for n in range(count):
            workspace, _ = accounts.create_workspace(services, name=f"W{n}", owner_email=f"w{n}@example.com")
            _, key = api_keys.create(services, workspace_id=workspace.id,
                                     request=api_keys.CreateKeyRequest(name="bench", scopes=["*"]))
            made.append((str(workspace.id), key))
        return made
    finally:
        services.close()


def rollbacks(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()").fetchone()
    return int(row[0]) if row else 0


class Mixed:
    """The mixed load's state: what was asked, answered and acknowledged."""

    def __init__(self, ports: list[int], key: str, domains: list[str], rate: float) -> None:
        self.ports, self.key, self.rate = ports, key, rate
        self.domains = domains  # every acknowledged domain id, GET and query targets
        self.times: dict[str, list[float]] = {kind: [] for kind in WEIGHTS}
        self.errors: dict[str, int] = dict.fromkeys(WEIGHTS, 0)
        self.lost_connection: list[float] = []  # when requests lost their connection (seconds into the load)
        self.created: set[str] = set()
        self.expected: dict[str, set[str]] = {}  # patched domain -> the values it may hold now
        self.sent = 0
        self.started = 0.0
        self.refused = 0  # connections refused by a process down, made to the other instead

    async def worker(self, n: int, seconds: float) -> None:
        client = Client(self.ports[n % len(self.ports)], self.key)
        mine = self.domains[n::CONNECTIONS]
        rng, serial = random.Random(n), 0
        kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
        try:
            while True:
                at = self.started + self.sent / self.rate
                self.sent += 1
                if at - self.started >= seconds:
                    return
                await asyncio.sleep(max(0.0, at - time.perf_counter()))
                kind = rng.choices(kinds, weights)[0]
                serial += 1
                if kind == "get":
                    method, path, body = "GET", f"/v1/domains/{rng.choice(self.domains)}", None
                elif kind == "query":
                    method, path, body = "POST", "/v1/domains/query", rng.choice(QUERIES)
                elif kind == "patch":
                    target, value = rng.choice(mine), f"c{n}-{serial}"
                    method, path, body = "PATCH", f"/v1/domains/{target}", {"notes": value}
                    self.expected.setdefault(target, {"?"}).add(value)  # may hold it from now on
                else:
                    names = [f"n{n}-{serial}-{k}.bulk.example.org" for k in range(rng.randint(1, 16))]
                    method, path, body = "POST", "/v1/domains/bulk", {"apexList": names}
                try:
                    status, answer, took = await self.send(client, method, path, body)
                except (OSError, asyncio.IncompleteReadError):
                    # In flight when its process died: whether it was done is unknown. The
                    # connection goes to the other process from now on, as a proxy's would.
                    self.lost_connection.append(time.perf_counter() - self.started)
                    client.close()
                    home = 1 - self.ports.index(client.port)
                    client = Client(self.ports[home], self.key)
                    continue
                self.times[kind].append(took)
                if status >= 500:
                    self.errors[kind] += 1
                elif kind == "patch" and status == 200:
                    self.expected[target] = {value}  # acknowledged: nothing earlier may be there
                elif kind == "bulk" and status == 200:
                    ids = [d["id"] for d in json.loads(answer)["created"]]
                    self.created.update(ids)
                    self.domains.extend(ids)
        finally:
            client.close()

    async def send(self, client: Client, method: str, path: str, body: object) -> tuple[int, bytes, float]:
        """``client.call``; a connection refused (the process is down) is made to the other process."""
        try:
            return await client.call(method, path, body)
        except ConnectionRefusedError:
            self.refused += 1
            client.port = self.ports[1 - self.ports.index(client.port)]
            return await client.call(method, path, body)

    def check(self, url: str) -> tuple[int, int]:
        """Acknowledged creates missing, acknowledged patches whose value is not there."""
        with psycopg.connect(url, autocommit=True) as conn:
            present = {row[0] for row in conn.execute("SELECT id FROM domains")}
            notes = dict(conn.execute("SELECT id, notes FROM domains WHERE id = ANY(%s)", [list(self.expected)]).fetchall())
        wrong = sum(1 for d, values in self.expected.items() if notes.get(d) not in values and not
                    ("?" in values and notes.get(d) is None))
        return len(self.created - present), wrong


async def import_domains(port: int, key: str, count: int) -> list[str]:
    client = Client(port, key)
    ids: list[str] = []
    try:
        for start in range(0, count, 500):
            status, body, _ = await client.call("POST", "/v1/domains/bulk", {
                "apexList": [f"imp{n}.customer{n % 97}.example.com" for n in range(start, min(count, start + 500))]})
            if status != 200:
                raise RuntimeError(f"the import answered {status}: {body[:300]!r}")
            ids += [d["id"] for d in json.loads(body)["created"]]
    finally:
        client.close()
    return ids


def mixed_run(server: pg.BenchPostgres, args: argparse.Namespace, kill: bool) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="bench-processes-"))
    name = "processes_mixed"
    server.drop_database(name)
    url = server.create_database(name)
    services = []
    try:
        [(_, key)] = workspaces_with_keys(url, folder, 1)
        services = [Service(folder, url, 18700 + i).start() for i in range(2)]
        before = loadavg()
        ids = asyncio.run(import_domains(services[0].port, key, args.import_count))
        load = Mixed([s.port for s in services], key, ids, args.rate)
        rolled_back = rollbacks(url)

        async def run() -> None:
            load.started = time.perf_counter()
            workers = [asyncio.ensure_future(load.worker(n, args.seconds)) for n in range(CONNECTIONS)]
            if kill:
                await asyncio.sleep(args.kill_at)
                services[1].kill()
                await asyncio.to_thread(services[1].start)
            await asyncio.gather(*workers)

        asyncio.run(run())
        after = loadavg()
        lost, wrong = load.check(url)
        return {"load": load, "lost": lost, "wrong": wrong, "rollbacks": rollbacks(url) - rolled_back,
                "loadavg": f"{before} -> {after}", "kill": kill}
    finally:
        for service in services:
            service.stop()
        server.drop_database(name)


def show_mixed(result: dict, args: argparse.Namespace) -> None:
    load: Mixed = result["load"]
    print(f"\n== mixed load, {'one process SIGKILLed at ' + str(args.kill_at) + ' s' if result['kill'] else 'no kill'}"
          f" (load average {result['loadavg']})")
    print(f"{'kind':<8} {'requests':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'5xx':>5}")
    for kind, times in load.times.items():
        print(f"{kind:<8} {len(times):>9,} {pct(times, .5) * 1000:>8.1f} {pct(times, .99) * 1000:>8.1f} "
              f"{max(times, default=0) * 1000:>8.1f} {load.errors[kind]:>5}")
    sent = sum(len(t) for t in load.times.values())
    shown = ", ".join(f"{t:.1f}" for t in load.lost_connection[:8])
    print(f"answered {sent:,} of {load.sent - CONNECTIONS:,} asked ({sent / args.seconds:.0f}/s); in flight when their "
          f"process died: {len(load.lost_connection)} (at {shown or '-'} s); connections refused, made to the other "
          f"process: {load.refused}")
    print(f"acknowledged creates missing: {result['lost']} of {len(load.created):,}; acknowledged patches not there: "
          f"{result['wrong']} of {len(load.expected):,} domains patched; transactions rolled back: {result['rollbacks']:,}")


def creates_run(server: pg.BenchPostgres, args: argparse.Namespace, spread: int) -> tuple[float, int]:
    """Seconds for ``--count`` creates at once into ``spread`` workspaces, and the 5xx answers."""
    folder = Path(tempfile.mkdtemp(prefix="bench-creates-"))
    name = "processes_creates"
    server.drop_database(name)
    url = server.create_database(name)
    services = []
    try:
        keys = [key for _, key in workspaces_with_keys(url, folder, spread)]
        services = [Service(folder, url, 18700 + i).start() for i in range(2)]
        failed = 0
        names = iter(range(args.count))

        async def worker(n: int) -> None:
            nonlocal failed
            client = Client(services[n % 2].port, keys[n % spread])
            try:
                for k in names:
                    status, _, _ = await client.call("POST", "/v1/domains", {"apex": f"shop{k}.example.com"})
                    failed += status >= 500
            finally:
                client.close()

        async def run() -> float:
            started = time.perf_counter()
            await asyncio.gather(*(worker(n) for n in range(32)))
            return time.perf_counter() - started

        return asyncio.run(run()), failed
    finally:
        for service in services:
            service.stop()
        server.drop_database(name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--rate", type=float, default=150)
    parser.add_argument("--kill-at", type=float, default=60)
    parser.add_argument("--no-kill", action="store_true")
    parser.add_argument("--import", dest="import_count", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--creates", action="store_true", help="concurrent creates, one workspace against several")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--workspaces", type=int, default=8)
    args = parser.parse_args()
    server = pg.BenchPostgres(pg.cluster_folder()).start()
    try:
        if args.creates:
            rows: dict[int, list[tuple[float, int]]] = {1: [], args.workspaces: []}
            for _ in range(args.runs):
                for spread, results in rows.items():
                    results.append(creates_run(server, args, spread))
                    print(f"  {spread} workspace(s): {results[-1][0]:.2f} s (load average {loadavg()})", file=sys.stderr)
            print(f"{args.count:,} creates at once, 32 connections, two processes: median of {args.runs}")
            for spread, results in rows.items():
                seconds = [s for s, _ in results]
                print(f"  into {spread} workspace(s): {statistics.median(seconds):.2f} s "
                      f"({', '.join(f'{s:.2f}' for s in seconds)}), 5xx {sum(f for _, f in results)}")
            return
        for _ in range(args.runs):
            show_mixed(mixed_run(server, args, kill=not args.no_kill), args)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
