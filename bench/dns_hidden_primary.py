"""The hidden-primary part of bench/delegation_dns.py: NSD and Knot as secondaries of the built-in
server (TSIG-signed transfers, NOTIFY), and the time from a value written through the service's
records to its answer by both."""

from __future__ import annotations

import asyncio
import base64
import os
import time
import uuid
from pathlib import Path

import attrs
import dns.asyncquery
import dns.exception
import dns.message
import dns.rcode

from bench.dns_servers import (
    PATIENCE,
    VALUE,
    ZONE,
    Server,
    builtin_config,
    knot_conf,
    load,
    make_server,
    nsd_conf,
    open_store,
    pct,
)
from core.clock import SystemClock
from core.delegation_dns.notify import Notifier
from core.delegation_dns.records import StoredRecords
from tests.servers.service import free_port

TSIG_NAME, TSIG_ALGORITHM = "cps-acme", "hmac-sha256"


def start_secondaries(folder: Path, primary: int, secret: str, nsd_port: int, knot_port: int) -> list[Server]:
    """NSD and Knot on their ports, each a secondary of the built-in server on ``primary``: transfers
    signed with the TSIG key, NOTIFY taken from the primary (signed or not). Started after the
    primary: a secondary whose first transfer failed waits long before the next."""
    nsd_zone = (f'key:\n  name: "{TSIG_NAME}"\n  algorithm: {TSIG_ALGORITHM}\n  secret: "{secret}"\n'
                f'zone:\n  name: "{ZONE}"\n  zonefile: "{folder / "secondary-nsd.zone"}"\n'
                f"  request-xfr: 127.0.0.1@{primary} {TSIG_NAME}\n"
                f"  allow-notify: 127.0.0.1 {TSIG_NAME}\n  allow-notify: 127.0.0.1 NOKEY\n")
    nsd = Server("NSD secondary", ["nsd", "-d", "-c", str(nsd_conf(folder, "secondary-nsd", nsd_port, nsd_zone))],
                 nsd_port, folder)
    knot_zone = f"""\
key:
  - id: {TSIG_NAME}
    algorithm: {TSIG_ALGORITHM}
    secret: {secret}
remote:
  - id: primary
    address: 127.0.0.1@{primary}
    key: {TSIG_NAME}
acl:
  - id: notify-signed
    address: 127.0.0.1
    key: {TSIG_NAME}
    action: notify
  - id: notify
    address: 127.0.0.1
    action: notify
zone:
  - domain: {ZONE}
    storage: "{folder}"
    file: "secondary-knot.zone"
    master: primary
    acl: [notify-signed, notify]
"""
    knot = Server("Knot secondary", ["knotd", "-c", str(knot_conf(folder, "secondary-knot", knot_port, knot_zone))],
                  knot_port, folder)
    return [nsd, knot]


async def hidden_primary(folder: Path, where: str, writes: int) -> None:
    print("\n== hidden primary ==", end=" ")
    folder.mkdir()
    secret = base64.b64encode(os.urandom(32)).decode()
    port = free_port()
    store = open_store(where)
    config = builtin_config(f"127.0.0.1:{port}", tsig_key_name=TSIG_NAME, tsig_secret=secret, tsig_algorithm=TSIG_ALGORITHM)
    ports = free_port(), free_port()
    config = attrs.evolve(config, secondaries=[f"127.0.0.1:{each}" for each in ports])
    secondaries: list[Server] = []
    server = None
    try:
        server = make_server(config, store)
        await server.start()
        secondaries = start_secondaries(folder, port, secret, *ports)
        for secondary in secondaries:  # the first transfer
            await asyncio.to_thread(secondary.wait_for)
        records = StoredRecords(ZONE, store, SystemClock(), notifier=Notifier(config))
        latencies = []
        loadavg = load()
        for _ in range(writes):
            name = f"{uuid.uuid4().hex[:16]}.{ZONE}"
            started = time.perf_counter()
            await records.publish(name, VALUE)
            await until_answered(name, [s.port for s in secondaries], started)
            latencies.append(time.perf_counter() - started)
        print(f"{writes} values written through StoredRecords, each until NSD and Knot (secondaries, NOTIFY + IXFR) "
              f"both answer it (load {loadavg:.2f} -> {load():.2f}): p50 {pct(latencies, .5):.1f} ms, "
              f"p99 {pct(latencies, .99):.1f} ms, max {max(latencies) * 1000:.1f} ms")
    finally:
        if server is not None:
            await server.stop()
        for secondary in secondaries:
            secondary.stop()
        store.close()


async def until_answered(name: str, ports: list[int], started: float) -> None:
    """Ask each port every 5 ms until it answers ``VALUE`` at ``name`` (at most ``PATIENCE``)."""
    waiting = set(ports)
    query = dns.message.make_query(name, "TXT")
    while waiting:
        if time.perf_counter() - started > PATIENCE:
            raise RuntimeError(f"{name} not answered by the secondaries on {sorted(waiting)} in {PATIENCE:g} s")
        for port in list(waiting):
            try:
                answer = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=0.5)
            except (dns.exception.Timeout, OSError):
                continue
            if any(VALUE.encode() in rdata.strings for rrset in answer.answer for rdata in rrset):
                waiting.discard(port)
        if waiting:
            await asyncio.sleep(0.005)
