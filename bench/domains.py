"""Domain benchmarks: prints numbers, asserts nothing. Not part of the test run.

    python bench/domains.py [--rows 100000] [--seconds 5] [--connections 16]

Seeds one workspace with ``--rows`` domains (and one with a tenth of that), starts the real
service (``python app.py``) and a bare Tornado handler as separate processes, and measures:
bulk create of 500, the first query page (default sort, and certStatus + tags filter) p50/p95,
walking 10 pages by cursor, and GET one domain by API key in requests/s against the bare
handler serving the same JSON, both driven by the same keep-alive load generator.

Targets (issue 3): bulk 500 < 250 ms; query p50 < 15 ms at 100k rows and <= 1.5x the 10k value;
GET >= 50% of the bare handler's requests/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from core.config import Config, RateLimitsConfig, ServerConfig, StorageConfig
from core.domains import operations, records
from core.identity import accounts, api_keys
from core.runtime.assembly import build_services
from store.domain_rows import from_columns

TAGS = ["eu", "us", "apac", "vip", "trial", "legacy"]
CERT_MIX = ["none"] * 6 + ["pending", "active", "active", "error"]


async def seed(services, workspace, rows: int) -> None:
    """Create ``rows`` domains through the service's own bulk create, then vary their status."""
    rng = random.Random(rows)
    for start in range(0, rows, 500):
        names = [f"host{n}.customer{n % 997}.com" for n in range(start, min(start + 500, rows))]
        tags = rng.sample(TAGS, 2)
        await operations.bulk_create(
            services, workspace=workspace, request=operations.BulkCreate(apex_list=names, tags=tags)
        )
    store = services.store
    with store.transaction():
        page = store.domains.page(workspace.id, domains_filter(), sort_by="createdAt", descending=True, after=None, limit=rows)
        for row in map(from_columns, page):
            cert = rng.choice(CERT_MIX)
            status = "verified" if cert != "none" else row.validation_status
            store.domains.update(
                attrs.evolve(row, cert_status=cert, validation_status=status, ops_status=records.ops_status(status, cert))
            )


def domains_filter():
    from store.domains import DomainFilter

    return DomainFilter()


def request(base: str, method: str, path: str, token: str, body: object = None) -> tuple[float, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req) as response:
        payload = json.loads(response.read() or b"null")
    return (time.perf_counter() - start) * 1000, payload


def latencies(base: str, token: str, body: dict, runs: int = 60) -> tuple[float, float]:
    for _ in range(5):
        request(base, "POST", "/v1/domains/query", token, body)  # warm caches
    samples = sorted(request(base, "POST", "/v1/domains/query", token, body)[0] for _ in range(runs))
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


async def load(port: int, path: str, token: str, seconds: float, connections: int) -> float:
    """Requests per second from ``connections`` keep-alive HTTP/1.1 clients."""
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    done = 0
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.perf_counter() < deadline:
            writer.write(head)
            headers = await reader.readuntil(b"\r\n\r\n")
            assert headers.startswith(b"HTTP/1.1 200"), headers[:60]
            length = int(next(line.split(b":")[1] for line in headers.split(b"\r\n") if line.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            done += 1
        writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(connections)))
    return done / (time.perf_counter() - start)


BARE = textwrap.dedent(
    """
    import sys, tornado.web, tornado.ioloop
    body = open(sys.argv[2], "rb").read()
    class H(tornado.web.RequestHandler):
        def get(self, _):
            self.set_header("Content-Type", "application/json; charset=UTF-8")
            self.write(body)
    tornado.web.Application([(r"/v1/domains/(.*)", H)]).listen(int(sys.argv[1]), "127.0.0.1")
    print("listening", flush=True)
    tornado.ioloop.IOLoop.current().start()
    """
)


def _pin(cpu: int) -> None:
    """Servers on one core, the load generator on the other: they do not steal from each other."""
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and os.cpu_count() > 1:
        os.sched_setaffinity(0, {cpu})


def start(cmd: list[str], marker: str, log: Path) -> subprocess.Popen:
    """Start a server whose output goes to a file (a full pipe would stall it) and wait for it."""
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, stderr=subprocess.STDOUT, stdout=out, text=True, cwd=ROOT, preexec_fn=lambda: _pin(0),  # noqa: PLW1509  # the bench starts no thread before this
        )
    for _ in range(100):
        if marker in log.read_text():
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"{cmd} did not start; see {log}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-domains-"))
    port, bare_port = 18080, 18081
    config = Config(
        server=ServerConfig(port=port),
        storage=StorageConfig(path=str(tmp / "db.sqlite3"), secret_key_file=str(tmp / "secret.key")),
        rate_limits=RateLimitsConfig(api=10**9),
    )
    services = build_services(config)
    big, _ = accounts.create_workspace(services, name="big", owner_email="big@example.com")
    small, _ = accounts.create_workspace(services, name="small", owner_email="small@example.com")
    started = time.perf_counter()
    asyncio.run(seed(services, big, args.rows))
    asyncio.run(seed(services, small, args.rows // 10))
    print(f"seeded {args.rows} + {args.rows // 10} domains in {time.perf_counter() - started:.1f} s")

    bulk_ms = []
    for run in range(5):
        names = [f"bulk{run}-{n}.example.com" for n in range(500)]
        t0 = time.perf_counter()
        result = asyncio.run(operations.bulk_create(services, workspace=big, request=operations.BulkCreate(apex_list=names)))
        bulk_ms.append((time.perf_counter() - t0) * 1000)
        assert len(result.created) == 500
    key = {}
    for ws in (big, small):
        _, key[ws.name] = api_keys.create(
            services, workspace_id=ws.id, request=api_keys.CreateKeyRequest(name="bench", scopes=["*"])
        )
    services.close()
    (tmp / "config.toml").write_text(
        f'[server]\nport = {port}\n[storage]\npath = "{tmp / "db.sqlite3"}"\nsecret_key_file = "{tmp / "secret.key"}"\n'
        "[rate_limits]\napi = 1000000000\n"
    )
    app = start([sys.executable, "app.py", "--config", str(tmp / "config.toml")], "listening on", tmp / "app.log")
    try:
        base = f"http://127.0.0.1:{port}"
        filtered = {"certStatus": "active", "tags": ["eu"]}
        results = {}
        for name in ("big", "small"):
            results[name] = {
                "default": latencies(base, key[name], {"page": {"limit": 100}}),
                "filtered": latencies(base, key[name], {**filtered, "page": {"limit": 100}}),
            }
        t0 = time.perf_counter()
        body: dict = {"page": {"limit": 100}}
        for _ in range(10):
            _, page = request(base, "POST", "/v1/domains/query", key["big"], body)
            body = {"page": {"limit": 100, "cursor": page["nextCursor"]}}
        walk_ms = (time.perf_counter() - t0) * 1000
        domain_id = page["items"][0]["id"]
        _, one = request(base, "GET", f"/v1/domains/{domain_id}", key["big"])
        (tmp / "domain.json").write_text(json.dumps(one, separators=(",", ":")))
        bare = start([sys.executable, "-c", BARE, str(bare_port), str(tmp / "domain.json")], "listening", tmp / "bare.log")
        try:
            path = f"/v1/domains/{domain_id}"
            _pin(1)
            for target in (port, bare_port):
                asyncio.run(load(target, path, key["big"], 1, args.connections))  # warm-up
            service_runs, bare_runs = [], []
            for _ in range(3):  # interleaved rounds; the medians damp machine noise
                service_runs.append(asyncio.run(load(port, path, key["big"], args.seconds, args.connections)))
                bare_runs.append(asyncio.run(load(bare_port, path, key["big"], args.seconds, args.connections)))
            service_rps, bare_rps = statistics.median(service_runs), statistics.median(bare_runs)
        finally:
            bare.terminate()
    finally:
        app.terminate()
        app.wait()

    big_p50 = results["big"]["default"][0]
    small_p50 = results["small"]["default"][0]
    print(f"bulk create 500:            median {statistics.median(bulk_ms):.1f} ms (runs: {', '.join(f'{m:.0f}' for m in bulk_ms)})")
    for name, rows in (("big", args.rows), ("small", args.rows // 10)):
        d, f = results[name]["default"], results[name]["filtered"]
        print(f"query page 100 @ {rows:>6} rows: default p50 {d[0]:.1f} ms p95 {d[1]:.1f} ms | certStatus+tags p50 {f[0]:.1f} ms p95 {f[1]:.1f} ms")
    print(f"query p50 ratio {args.rows} / {args.rows // 10} rows: default {big_p50 / small_p50:.2f}x, "
          f"filtered {results['big']['filtered'][0] / results['small']['filtered'][0]:.2f}x")
    print(f"walk 10 pages of 100:       {walk_ms:.0f} ms ({walk_ms / 10:.1f} ms per page)")
    print(f"GET one domain (API key):   {service_rps:.0f} req/s; bare Tornado handler {bare_rps:.0f} req/s; "
          f"ratio {service_rps / bare_rps:.0%} (medians of 3 interleaved rounds, {args.connections} connections, "
          f"{args.seconds:g} s each; rounds: {', '.join(f'{a:.0f}/{b:.0f}' for a, b in zip(service_runs, bare_runs))})")


if __name__ == "__main__":
    main()
