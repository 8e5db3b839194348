"""Provider budget flood benchmark: prints numbers, asserts nothing. Not part of the test run.

    python bench/flood.py [--requests 200] [--window 10] [--seconds 20]

The real service (``python app.py``, core 0) with the Cloudflare provider pointed at the fake
Cloudflare API (tests/servers/cloudflare.py, its quota and window the service's budget), and two
workspaces. The flooding one refreshes its certificate over ``--flooders`` keep-alive connections,
each sending the next request as soon as the last is answered (as a tenant spread over several
client addresses would get past the per-address rate limits, which are off here). Meanwhile the
quiet one issues a certificate for a verified domain and refreshes it, a call every
``1 / --quiet-rate`` seconds (its own calls stay well inside its share). Measured for
``--seconds`` (two windows by default), twice, on a fresh service each time: with each workspace
held to ``[provider] workspace_share = 0.25`` of the budget, and with no such limit
(``workspace_share = 1``, the budget as before issue 38):

- the quiet workspace's issue/refresh p50 and p99 and its 503 ``provider_busy`` answers;
- the flooder's calls that reached the provider, against its share of the windows measured;
- 429 answers of the fake (target 0).

Target: with the limit, the quiet workspace never gets a 503 and its p99 stays under 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
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

from bench.certificates import _pin, pct, seed, start_dns, start_service, stop, write_config
from bench.lifecycle import Client, paced
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


async def measure(args, port: int, flooder: tuple[str, str], quiet_side: tuple[str, list[str]]) -> dict:
    result: dict = {"flood": {}, "quiet": []}
    token, domain_id = flooder
    client = Client(port, token)
    try:
        status, body, _ = await client.call("POST", f"/v1/domains/{domain_id}/certificates/issue")
    finally:
        client.close()
    if status != 200:
        raise RuntimeError(f"the flooder's issue answered {status}: {body[:300]!r}")
    certificate = json.loads(body)["certificateId"]
    stopping = asyncio.Event()
    tasks = [asyncio.ensure_future(flood(port, token, certificate, stopping, result)) for _ in range(args.flooders)]
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
        flood_token, [flood_row] = asyncio.run(seed(config, ["flood.tenant-a.com"], verified=True))
        steps = math.ceil(args.quiet_rate * args.seconds) + 1
        quiet_token, quiet_rows = asyncio.run(seed(config, [f"shop{n}.tenant-b.com" for n in range(steps)],
                                                   verified=True))
        proc, port = start_service(config)
        fake.reset()  # the seeding's delegation lookups are not counted
        result = asyncio.run(measure(args, port, (flood_token, str(flood_row.id)),
                                     (quiet_token, [str(row.id) for row in quiet_rows])))
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
    parser.add_argument("--flooders", type=int, default=4, help="the flooding workspace's connections")
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
    print(f"{args.flooders} connections flood refresh for {args.seconds:g} s; budget {args.requests} calls / "
          f"{args.window:g} s; the quiet workspace {args.quiet_rate:g} calls/s")
    print(f"{'measure':<66} {'result':<24} target")
    for share, result in runs.items():
        ms = [seconds * 1000 for _, seconds in result["quiet"]]
        busy = sum(1 for status, _ in result["quiet"] if status == 503)
        other = sum(1 for status, _ in result["quiet"] if status not in (200, 503))
        flooded = result["flood"].get(200, 0) + 1  # and its issue
        limited = share < 1
        verdict = "met" if busy == 0 and pct(ms, .99) < 1000 else "MISSED"
        for measure, value, target in (
            (f"quiet workspace issue/refresh p50 / p99, workspace_share = {share:g}",
             f"{pct(ms, .5):.1f} / {pct(ms, .99):.1f} ms", f"< 1000 ms, no 503 {verdict}" if limited else ""),
            ("  quiet workspace 503 provider_busy", f"{busy} of {len(ms)}", f"other non-200: {other}" if other else ""),
            ("  flooder's calls that reached the provider / its share",
             f"{flooded} / {max(1, int(args.requests * share)) * windows}", f"(503s: {result['flood'].get(503, 0)})"),
            ("  429 answers from the fake Cloudflare", f"{result['too_many']}", "0"),
        ):
            print(f"{measure:<66} {value:<24} {target}".rstrip())
    print(f"(whole run {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
