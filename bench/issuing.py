"""The ACME provider against Pebble: prints numbers, asserts nothing. Not part of the test run.

    python bench/issuing.py [--domains 500] [--connections 16]

The parts of tests/acme/ (tests/acme/conftest.py), on loopback: NSD serving the customers' zone,
Unbound resolving it and the delegation zone, Pebble validating through Unbound, ``python app.py``
with ``[provider] kind = "acme"`` answering for the delegation zone, and Debian's Caddy serving the
customers' hostnames (deploy/Caddyfile.customers). Measured:

1. **Records published to a certificate served**: one domain's CNAME and TXT published, then
   ``verify-delegation`` (the order, Pebble's validation, issuance), then TLS handshakes with its
   hostname through Caddy until one presents the certificate, valid against Pebble's root: the
   seconds from publishing to that handshake (p50 and max over ``--samples``).
2. **Orders per second**: ``--domains`` domains created in bulk, their records published at once,
   then ``verify-delegation`` for each over ``--connections`` keep-alive connections: each a new
   order, validated and issued. The orders budget is raised out of the way (``orders_per_window``).

Pebble runs with ``PEBBLE_VA_NOSLEEP``: what is measured is the service's side and Pebble's
signing, not a production CA's queueing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.certificates import pct
from bench.lifecycle import Client
from core.config import load_config
from core.identity import accounts, api_keys
from core.runtime.assembly import build_services
from tests.servers.dns_lab import DnsLab
from tests.servers.pebble import Pebble
from tests.servers.service import ServiceProcess, free_port
from tests.servers.terminators import SECRET, CustomersCaddy, presented

ZONE = "acme.saas.test"
CUSTOMERS = "lab.com"


async def api_key(service: ServiceProcess) -> str:
    services = build_services(load_config(service.config))
    try:
        workspace, _ = accounts.create_workspace(services, name="bench", owner_email="bench@saas.test")
        _, secret = api_keys.create(services, workspace_id=workspace.id,
                                    request=api_keys.CreateKeyRequest(name="bench", scopes=["*"]))
        return secret
    finally:
        services.close()


def records(domain: dict) -> list[str]:
    apex, validation = domain["apex"], domain["validation"]
    return [f"_acme-challenge.{apex}. 300 IN CNAME {validation['delegation']['value']}.",
            f'_service-verify.{apex}. 300 IN TXT "{validation["ownership"]["value"]}"']


async def served_after_publishing(service, caddy, token, lab, pebble, samples: int) -> list[float]:
    client = Client(service.port, token)
    took = []
    try:
        for n in range(samples):
            apex = f"served{n}.{CUSTOMERS}"
            _, body, _ = await client.call("POST", "/v1/domains", {"apex": apex})
            domain = json.loads(body)
            started = time.perf_counter()
            lab.publish_many(CUSTOMERS, records(domain))
            _, body, _ = await client.call("POST", f"/v1/domains/{domain['id']}/verify-delegation")
            assert json.loads(body)["certificate"]["status"] == "active", body
            root = pebble.root_pem()
            while True:
                try:
                    presented(caddy.https_port, apex, root)
                    break
                except OSError:
                    await asyncio.sleep(0.05)
            took.append(time.perf_counter() - started)
    finally:
        client.close()
    return took


async def orders(service, token, lab, count: int, connections: int) -> tuple[float, int, list[float]]:
    creator = Client(service.port, token)
    ids, lines = [], []
    for start in range(0, count, 500):
        apexes = [f"o{n}.{CUSTOMERS}" for n in range(start, min(count, start + 500))]
        _, body, _ = await creator.call("POST", "/v1/domains/bulk", {"apexList": apexes})
        for domain in json.loads(body)["created"]:
            ids.append(domain["id"])
            lines += records(domain)
    creator.close()
    lab.publish_many(CUSTOMERS, lines)
    queue = list(ids)
    active, latencies = 0, []

    async def worker() -> None:
        nonlocal active
        client = Client(service.port, token)
        try:
            while queue:
                domain_id = queue.pop()
                _, body, seconds = await client.call("POST", f"/v1/domains/{domain_id}/verify-delegation")
                latencies.append(seconds)
                active += json.loads(body).get("certificate", {}).get("status") == "active"
        finally:
            client.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return time.perf_counter() - started, active, latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--domains", type=int, default=500)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-acme-"))
    dns_port, terminator = free_port(), free_port()
    (folder / "dns").mkdir()
    lab = DnsLab(folder / "dns")
    lab.stubs[ZONE] = f"127.0.0.1@{dns_port}"
    lab.start()
    pebble = Pebble(folder / "pebble", dns_server=lab.resolver).start()
    service = ServiceProcess(folder, dns_address=lab.resolver, extra=(
        f'[provider]\nkind = "acme"\n[provider.acme]\ndirectory_url = "{pebble.directory_url}"\n'
        f'ca_bundle = "{pebble.ca_bundle}"\norders_per_window = 100000\n'
        f'[delegation_dns]\nzone = "{ZONE}"\nnameservers = ["ns1.saas.test"]\nlisten = "127.0.0.1:{dns_port}"\n'
        f'[tls_terminator]\nlisten = "127.0.0.1:{terminator}"\nsecret = "{SECRET}"\n'
        '[network]\nallow_private_ranges = ["127.0.0.0/29"]\n[lifecycle]\nenabled = false\n'
        '[rate_limits]\napi = 1000000\n'
    ))
    caddy = None
    try:
        token = asyncio.run(api_key(service))
        service.start()
        caddy = CustomersCaddy(folder / "caddy", terminator=f"http://127.0.0.1:{terminator}",
                               upstream=f"127.0.0.1:{service.port}").start()
        served = asyncio.run(served_after_publishing(service, caddy, token, lab, pebble, args.samples))
        seconds, active, latencies = asyncio.run(orders(service, token, lab, args.domains, args.connections))
    finally:
        if caddy is not None:
            caddy.stop()
        service.stop()
        pebble.stop()
        lab.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{'measure':<58} result")
    print(f"{'records published to a certificate served by Caddy, p50':<58} {pct(served, .5):.2f} s")
    print(f"{'  max of ' + str(len(served)):<58} {max(served):.2f} s")
    print(f"{f'orders for {args.domains} domains, {args.connections} connections':<58} {args.domains / seconds:.1f} /s "
          f"({seconds:.1f} s, {active} active)")
    print(f"{'  verify-delegation with its order, p50 / p99':<58} {pct(latencies, .5):.2f} / {pct(latencies, .99):.2f} s")


if __name__ == "__main__":
    main()
