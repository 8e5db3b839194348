"""Provider budget flood benchmark: prints numbers, asserts nothing. Not part of the test run.

    python bench/flood.py [--requests 200] [--window 10] [--seconds 20] [--workspaces 6]

The real service (``python app.py``, core 0) with the Cloudflare provider pointed at the fake
Cloudflare API (tests/servers/cloudflare.py, its quota and window the service's budget), the
flooding workspaces of one person (``--workspaces``, each with one verified domain) and a quiet
one. Each flooding workspace issues a certificate, then refreshes it over ``--flooders`` keep-alive
connections in all, each sending the next request as soon as the last is answered (as a tenant
spread over several client addresses would get past the per-address rate limits, which are off
here). Meanwhile the quiet one, whose ``--quiet-hostnames`` hostnames have served certificates for
a day, issues a certificate for a verified domain and refreshes it, a call every
``1 / --quiet-rate`` seconds (its own calls stay well inside its share). Measured for
``--seconds`` (two windows by default), twice, on a fresh service each time: with the shares of
``[provider]`` as configured by default (``workspace_share = 0.25``, a new workspace's
``new_workspace_share = 0.02``, one call for each hostname serving a certificate), and with no
limit (``workspace_share = 1``, the budget as before issue 38):

- the quiet workspace's issue/refresh p50 and p99 and its 503 ``provider_busy`` answers;
- the flooders' calls that reached the provider, against the share of the windows measured that
  new workspaces have together (one ``workspace_share``);
- 429 answers of the fake (target 0).

Target: with the limit, the quiet workspace never gets a 503 and its p99 stays under 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import attrs

from bench.certificates import _pin, pct, seed, start_dns, start_service, stop, write_config
from bench.lifecycle import Client, paced
from core.config import load_config
from core.domains import records
from core.runtime.assembly import build_services
from tests.servers.cloudflare import TOKEN, ZONE_ID, FakeCloudflare


async def flood(port: int, token: str, certificate: str, stop_flood: asyncio.Event, result: dict) -> None:
    """Refresh one certificate back to back until told to stop."""
    client = Client(port, token)
    try:
        while not stop_flood.is_set():
            status, _, _ = await client.call("POST", f"/v1/certificates/{certificate}/refresh")
            result["flood"][status] = result["flood"].get(status, 0) + 1
    finally:
        client.close()


async def quiet(port: int, token: str, domain_ids: list[str], rate: float, stop_quiet: asyncio.Event,
                result: dict) -> None:
    """Issue for the next domain, then refresh what was issued; one call each step."""
    client = Client(port, token)
    fresh, issued = iter(domain_ids), []

    async def step() -> None:
        path = (f"/v1/certificates/{issued.pop()}/refresh" if issued
                else f"/v1/domains/{next(fresh)}/certificates/issue")
        status, body, seconds = await client.call("POST", path)
        result["quiet"].append((status, seconds))
        if status == 200 and path.endswith("/issue"):
            issued.append(json.loads(body)["certificateId"])

    try:
        await paced(rate, stop_quiet, step)
    finally:
        client.close()


def serving(config: Path, rows: list) -> None:
    """``rows`` verified and serving certificates issued a day ago (no provider call made)."""
    services = build_services(load_config(config))
    try:
        issued = services.clock.now() - dt.timedelta(days=1)
        status = records.ops_status("verified", "active")
        with services.store.transaction():
            for row in rows:
                services.store.domains.update(attrs.evolve(row, validation_status="verified", cert_status="active",
                                                           ops_status=status, cert_last_issued_at=issued))
    finally:
        services.close()


async def measure(args, port: int, flooders: list[tuple[str, str]], quiet_side: tuple[str, list[str]]) -> dict:
    result: dict = {"flood": {}, "quiet": []}
    certificates = []
    for token, domain_id in flooders:
        client = Client(port, token)
        try:
            status, body, _ = await client.call("POST", f"/v1/domains/{domain_id}/certificates/issue")
        finally:
            client.close()
        result["flood"][status] = result["flood"].get(status, 0) + 1
        if status == 200:
            certificates.append((token, json.loads(body)["certificateId"]))
    stopping = asyncio.Event()
    tasks = [asyncio.ensure_future(flood(port, *certificates[n % len(certificates)], stopping, result))
             for n in range(args.flooders) if certificates]
    await asyncio.sleep(0.5)  # the flood has spent what it can before the quiet workspace starts
    tasks.append(asyncio.ensure_future(quiet(port, *quiet_side, args.quiet_rate, stopping, result)))
    await asyncio.sleep(args.seconds)
    stopping.set()
    await asyncio.gather(*tasks)
    return result


def run_once(tmp: Path, dns, args, share: float) -> dict:
    fake = FakeCloudflare(quota=args.requests, window=args.window).start()
    proc = None
    try:
        config = write_config(tmp / f"share-{share:g}", dns, (
            f'kind = "cloudflare"\nworkspace_share = {share}\n[provider.cloudflare]\napi_base = "{fake.api_base}"\n'
            f'zone_id = "{ZONE_ID}"\napi_token = "{TOKEN}"\nrequests_per_window = {args.requests}\n'
            f'window_seconds = {args.window}\nretry_seconds = 1\n[lifecycle]\nenabled = false'
        ))
        flooders = []
        for n in range(args.workspaces):  # one person's (bench@example.com) workspaces
            token, [row] = asyncio.run(seed(config, [f"flood{n}.tenant-a.com"], verified=True))
            flooders.append((token, str(row.id)))
        steps = math.ceil(args.quiet_rate * args.seconds) + 1
        names = [f"shop{n}.tenant-b.com" for n in range(steps)] + [f"live{n}.tenant-b.com" for n in range(args.quiet_hostnames)]
        quiet_token, quiet_rows = asyncio.run(seed(config, names, verified=True))
        serving(config, quiet_rows[steps:])
        proc, port = start_service(config)
        fake.reset()  # the seeding's delegation lookups are not counted
        result = asyncio.run(measure(args, port, flooders, (quiet_token, [str(row.id) for row in quiet_rows[:steps]])))
        with fake.lock:
            result["too_many"] = fake.statuses.count(429)
        return result
    finally:
        if proc is not None:
            stop(proc)
        fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200, help="[provider.cloudflare] requests_per_window")
    parser.add_argument("--window", type=float, default=10.0, help="[provider.cloudflare] window_seconds")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each flood lasts")
    parser.add_argument("--workspaces", type=int, default=6, help="flooding workspaces, of one person")
    parser.add_argument("--flooders", type=int, default=6, help="their connections, in all")
    parser.add_argument("--quiet-hostnames", type=int, default=30,
                        help="the quiet workspace's hostnames serving certificates")
    parser.add_argument("--quiet-rate", type=float, default=2.0, help="the quiet workspace's calls per second")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the seeding services' start-up warnings are noise here
    _pin(1)  # before any thread starts, so the fake API and DNS server threads inherit it
    started = time.perf_counter()
    dns = start_dns()
    tmp = Path(tempfile.mkdtemp(prefix="bench-flood-"))
    try:
        runs = {share: run_once(tmp, dns, args, share) for share in (0.25, 1.0)}
    finally:
        dns.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    windows = math.ceil((args.seconds + 0.5) / args.window)  # windows the flood could spend its share in
    print(f"{args.workspaces} workspaces of one person flood refresh over {args.flooders} connections for "
          f"{args.seconds:g} s; budget {args.requests} calls / {args.window:g} s; the quiet workspace "
          f"{args.quiet_rate:g} calls/s")
    print(f"{'measure':<66} {'result':<24} target")
    for share, result in runs.items():
        ms = [seconds * 1000 for _, seconds in result["quiet"]]
        busy = sum(1 for status, _ in result["quiet"] if status == 503)
        other = sum(1 for status, _ in result["quiet"] if status not in (200, 503))
        flooded = result["flood"].get(200, 0)  # their issues too
        limited = share < 1
        verdict = "met" if busy == 0 and pct(ms, .99) < 1000 else "MISSED"
        for measure, value, target in (
            (f"quiet workspace issue/refresh p50 / p99, workspace_share = {share:g}",
             f"{pct(ms, .5):.1f} / {pct(ms, .99):.1f} ms", f"< 1000 ms, no 503 {verdict}" if limited else ""),
            ("  quiet workspace 503 provider_busy", f"{busy} of {len(ms)}", f"other non-200: {other}" if other else ""),
            ("  flooders' calls that reached the provider / new workspaces' part",
             f"{flooded} / {max(1, int(args.requests * share)) * windows}", f"(503s: {result['flood'].get(503, 0)})"),
            ("  429 answers from the fake Cloudflare", f"{result['too_many']}", "0"),
        ):
            print(f"{measure:<66} {value:<24} {target}".rstrip())
    print(f"(whole run {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
