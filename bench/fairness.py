"""Fairness between workspaces (issue 38), run by ``python bench/lifecycle.py --fairness [--noisy 2000]
[--quiet 20]``: prints numbers, asserts nothing.

The sandbox provider, ``interval_seconds = 1``,
``[dns] timeout_seconds = 1``. A noisy workspace holds ``--noisy`` pending domains in a zone whose
nameservers never answer (the loopback DNS server leaves every name below it unanswered), all due
first; then a quiet workspace adds ``--quiet`` domains over HTTP, one a second, each answer's
records published at once. Measured: the quiet workspace's time from create to ``verified`` (p50,
p99, max) by the background checks alone, with the noisy workspace and without it.
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import tempfile
import time
from pathlib import Path

from bench.certificates import _pin, pct, seed, start_dns, start_service, stop, write_config
from bench.lifecycle import POLL_SECONDS, Client

DEAD_ZONE = "dead-zone.com"


async def quiet_times(port: int, token: str, dns, count: int) -> list[float]:
    """Seconds from create to verified of ``count`` domains added one a second (background checks only)."""
    creator, reader = Client(port, token), Client(port, token)
    waiting: dict[str, float] = {}
    took: list[float] = []

    async def create() -> None:
        for n in range(count):
            status, body, _ = await creator.call("POST", "/v1/domains", {"apex": f"shop{n}.quiet-tenant.com"})
            if status != 201:
                raise RuntimeError(f"create answered {status}: {body[:300]!r}")
            created = json.loads(body)
            for record in (created["validation"]["delegation"], created["validation"]["ownership"]):
                dns.publish(record["host"], record["type"], record["value"])
            waiting[created["id"]] = time.perf_counter()
            await asyncio.sleep(1)

    creating = asyncio.ensure_future(create())
    deadline = time.perf_counter() + count + 600
    try:
        while (waiting or not creating.done()) and time.perf_counter() < deadline:
            for domain_id, since in list(waiting.items()):
                _, body, _ = await reader.call("GET", f"/v1/domains/{domain_id}")
                if json.loads(body)["validation"]["status"] == "verified":
                    took.append(time.perf_counter() - since)
                    del waiting[domain_id]
            await asyncio.sleep(POLL_SECONDS)
        await creating
    finally:
        creator.close()
        reader.close()
    return took + [math.inf] * len(waiting)


def fairness_run(tmp: Path, dns, noisy: int, quiet: int) -> list[float]:
    """One run: the noisy workspace's backlog (``noisy`` domains, none when 0), then the quiet one's."""
    config = write_config(tmp, dns, 'kind = "sandbox"\n[lifecycle]\ninterval_seconds = 1', dns_timeout=1)
    if noisy:
        asyncio.run(seed(config, [f"h{n}.{DEAD_ZONE}" for n in range(noisy)], verified=False))
    token, _ = asyncio.run(seed(config, [], verified=False))
    proc, port = start_service(config)
    try:
        time.sleep(3)  # the noisy backlog falls due, and its checks start
        return asyncio.run(quiet_times(port, token, dns, quiet))
    finally:
        stop(proc)


def fairness(args) -> None:
    _pin(1)
    dns = start_dns()
    dns.zone.silent_below.add(DEAD_ZONE)
    tmp = Path(tempfile.mkdtemp(prefix="bench-fairness-"))
    rows = []
    try:
        for noisy in (0, args.noisy):
            took = fairness_run(tmp / f"noisy{noisy}", dns, noisy, args.quiet)
            rows.append((noisy, took))
    finally:
        dns.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'quiet workspace: create to verified, ' + str(args.quiet) + ' domains':<58} {'p50':>8} {'p99':>8} {'max':>8}")
    for noisy, took in rows:
        label = f"  beside a noisy workspace's {noisy:,} domains in a dead zone" if noisy else "  alone"
        print(f"{label:<58} {pct(took, .5):>7.1f}s {pct(took, .99):>7.1f}s {max(took):>7.1f}s")
