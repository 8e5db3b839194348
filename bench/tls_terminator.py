"""The TLS terminator's Caddy endpoint under load: prints numbers, asserts nothing. Not part of the
test run.

    python bench/tls_terminator.py [--certificates 10000] [--connections 16] [--seconds 5] [--rounds 3]

A SQLite database gets ``--certificates`` issued certificates, stored as core/acme/ stores them (the
chain, and the key encrypted with the service's keyring, bound to each handle): one EC key and
eight certificates, reused under different hostnames (the index neither parses nor checks them).
Then ``python app.py`` serves them with ``[tls_terminator]`` on (core 0), and so does a bare
Tornado handler answering the same bytes from a dict by ``server_name`` (core 0, the same
server settings left at Tornado's defaults). The load generator (this process, core 1) keeps
``--connections`` keep-alive connections, each asking ``GET /caddy/certificate`` with the query
Caddy 2.6 sends (``server_name``, ``signature_schemes``, ``cipher_suites``, and ``secret``) for
hostnames in a shuffled order, and records each request's latency. Runs alternate bare, service,
bare, service ... (``--rounds`` each); each figure is the median over its rounds.

Target: the service's requests/s at least 50 % of the bare handler's, and p50 and p99 within a
factor of two of its.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import random
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.parse
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trustme

from bench.domains import _pin, start
from core.crypto import Keyring, load_or_create_master_key
from store import Store
from store.acme import CERTIFICATE_KEY, AcmeCertificate
from store.records import DomainRow, Workspace
from tests.servers.terminators import owned

SERVICE_PORT, TERMINATOR_PORT, BARE_PORT = 18621, 18622, 18623
#: What Caddy 2.6.2 sends besides server_name (seen in a real handshake from Python's ssl module).
CADDY_QUERY = {
    "signature_schemes": "403,503,603,807,808,809,80a,80b,804,805,806,401,501,601,303,301,302,402,502,602",
    "cipher_suites": "1302,1303,1301,c02c,c030,c02b,c02f,cca9,cca8,c024,c028,c023,c027,9f,9e,6b,67,ff",
}

BARE = textwrap.dedent(
    """
    import sys, tornado.web, tornado.ioloop
    bodies = {}
    with open(sys.argv[2], "rb") as f:
        for line in f.read().split(b"\\n\\x00\\n"):
            if line:
                name, _, body = line.partition(b" ")
                bodies[name.decode()] = body
    class H(tornado.web.RequestHandler):
        def get(self):
            body = bodies.get(self.get_query_argument("server_name", ""))
            if body is None:
                self.set_status(404)
                return
            self.set_header("Content-Type", "application/x-pem-file")
            self.write(body)
    tornado.web.Application([(r"/caddy/certificate", H)]).listen(int(sys.argv[1]), "127.0.0.1")
    print("listening", flush=True)
    tornado.ioloop.IOLoop.current().start()
    """
)


def seed(folder: Path, count: int) -> dict[str, bytes]:
    """``count`` certificates stored as issued; the body each hostname must get."""
    ca = trustme.CA(key_type=trustme.KeyType.ECDSA)
    leaves = [ca.issue_cert(f"bench{n}.customer.test", key_type=trustme.KeyType.ECDSA) for n in range(8)]
    keyring = Keyring(load_or_create_master_key(folder / "secret.key"))
    store = Store(folder / "service.sqlite3")
    now = dt.datetime.now(dt.UTC)
    bodies: dict[str, bytes] = {}
    # Served only when a verified domain's Certificate record names it (store/acme.py): one workspace's.
    workspace = Workspace(id=uuid.uuid4(), name="bench", created_at=now, ownership_token=secrets.token_hex(16))
    with store.transaction():
        store.accounts.insert_workspace(workspace)
        for n in range(count):
            leaf = leaves[n % len(leaves)]
            host, handle = f"h{n}.customer.test", f"bench-{n}"
            chain = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
            key = leaf.private_key_pem.bytes()
            store.acme.put(AcmeCertificate(
                handle=handle, apex=host, directory_url="https://acme.test/directory", status="valid",
                created_at=now, updated_at=now, chain_pem=chain.decode(),
                key_ciphertext=keyring.encrypt(CERTIFICATE_KEY, key.decode(), bound_to=handle),
                not_before=now, not_after=now + dt.timedelta(days=90),
            ))
            domain = DomainRow(id=uuid.uuid4(), workspace_id=workspace.id, apex=host, tags=[], created_at=now,
                               updated_at=now, delegation_target="t.acme.test", validation_status="verified",
                               cert_status="active", ops_status="active", ownership_token=workspace.ownership_token)
            store.domains.insert(domain)
            owned(store, host, handle, domain=domain)
            bodies[host] = chain.strip() + b"\n" + key.strip() + b"\n"
    store.close()
    return bodies


def wait_for_port(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the service did not start") from None
            time.sleep(0.01)


async def load(port: int, paths: list[str], seconds: float, connections: int) -> tuple[float, list[float]]:
    """Requests per second and each request's latency (ms), over ``connections`` keep-alive clients."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def client(offset: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        n = offset
        while time.perf_counter() < deadline:
            head = f"GET {paths[n % len(paths)]} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
            n += connections
            started = time.perf_counter()
            writer.write(head)
            headers = await reader.readuntil(b"\r\n\r\n")
            assert headers.startswith(b"HTTP/1.1 200"), headers[:60]
            length = int(next(line.split(b":")[1] for line in headers.split(b"\r\n") if line.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            latencies.append((time.perf_counter() - started) * 1000)
        writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(connections)))
    return len(latencies) / (time.perf_counter() - began), latencies


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--certificates", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cps-bench-tls-"))
    secret = secrets.token_hex(24)
    service = bare = None
    try:
        started = time.perf_counter()
        bodies = seed(folder, args.certificates)
        print(f"seeded {args.certificates} certificates in {time.perf_counter() - started:.1f} s")
        (folder / "service.toml").write_text(
            f'[server]\nport = {SERVICE_PORT}\n[storage]\npath = "{folder / "service.sqlite3"}"\n'
            f'secret_key_file = "{folder / "secret.key"}"\n[lifecycle]\nenabled = false\n[logging]\nlevel = "info"\n'
            f'[tls_terminator]\nlisten = "127.0.0.1:{TERMINATOR_PORT}"\nsecret = "{secret}"\n'
        )
        service = start([sys.executable, str(ROOT / "app.py"), "--config", str(folder / "service.toml")],
                        "hostnames served", folder / "service.log")
        print("service:", next(line for line in (folder / "service.log").read_text().splitlines() if "hostnames served" in line))
        (folder / "bodies").write_bytes(b"".join(f"{name} ".encode() + body + b"\n\x00\n" for name, body in bodies.items()))
        (folder / "bare.py").write_text(BARE)
        bare = start([sys.executable, str(folder / "bare.py"), str(BARE_PORT), str(folder / "bodies")], "listening", folder / "bare.log")
        _pin(1)  # the load generator on the other core
        names = list(bodies)
        random.Random(1).shuffle(names)
        paths = {port: [f"/caddy/certificate?{urllib.parse.urlencode({**extra, 'server_name': name, **CADDY_QUERY})}" for name in names]
                 for port, extra in ((TERMINATOR_PORT, {"secret": secret}), (BARE_PORT, {}))}
        figures: dict[str, dict[str, list[float]]] = {"bare": {}, "service": {}}
        for _ in range(args.rounds):
            for name, port in (("bare", BARE_PORT), ("service", TERMINATOR_PORT)):
                asyncio.run(load(port, paths[port], 0.5, args.connections))  # warm-up
                rate, latencies = asyncio.run(load(port, paths[port], args.seconds, args.connections))
                for key, value in (("rps", rate), ("p50", percentile(latencies, 0.5)), ("p99", percentile(latencies, 0.99))):
                    figures[name].setdefault(key, []).append(value)
        median = {name: {key: statistics.median(values) for key, values in by.items()} for name, by in figures.items()}
        print(f"{args.certificates} certificates, {args.connections} keep-alive connections, {args.rounds} x {args.seconds:.0f} s each, interleaved")
        print(f"{'':10} {'requests/s':>12} {'p50 ms':>8} {'p99 ms':>8}")
        for name in ("bare", "service"):
            m = median[name]
            print(f"{name:10} {m['rps']:12.0f} {m['p50']:8.2f} {m['p99']:8.2f}")
        s, b = median["service"], median["bare"]
        print(f"share of bare: requests/s {100 * s['rps'] / b['rps']:.0f} %, p50 {100 * b['p50'] / s['p50']:.0f} %, "
              f"p99 {100 * b['p99'] / s['p99']:.0f} % (target: at least 50 %)")
    finally:
        for process in (service, bare):
            if process is not None:
                process.terminate()
                process.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
