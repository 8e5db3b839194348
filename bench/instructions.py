"""GET by key, counted in instructions rather than timed: prints numbers, asserts nothing.

    python bench/instructions.py [--requests 500] [--runs 3]

On a shared virtual machine the requests per second of the same code move by 30 % and more
between runs (bench/scale.py measures them anyway, the bare handler interleaved). The instructions
a request costs hardly move: the service (``python app.py`` on bench/scale.py's 10,000-domain
database) and the bare Tornado handler serving the same bytes (bench/domains.py) each run under
valgrind's callgrind, with counting switched on only after 200 warm-up requests, then
``--requests`` GETs of one domain on one keep-alive connection. Printed: instructions per request
of each, and the bare handler's over the service's, the share bench/scale.py's target is about
(75 %). Instructions are not time (the service's larger code misses the caches more), so this
ratio is an upper bound of the timed one. Needs valgrind (``apt install valgrind``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.domains import BARE
from bench.scale import CACHE, seed, serve
from store.sqlite.schema import MIGRATIONS

SIZE = 10_000
WARM_UP = 200


def callgrind(out: Path) -> tuple[str, ...]:
    # Counting starts switched off (callgrind_control switches it); Python's own allocator would be
    # counted as the same instructions either way, the system's keeps valgrind quieter.
    return ("env", "PYTHONMALLOC=malloc", "valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={out}")


def counted(process: subprocess.Popen, port: int, path: str, key: str, requests: int, out: Path) -> float:
    """Instructions per request of ``requests`` GETs after the warm-up, from callgrind's dump."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def get(times: int) -> None:
        for _ in range(times):
            connection.request("GET", path, headers={"Authorization": f"Bearer {key}"})
            response = connection.getresponse()
            response.read()
            assert response.status == 200, response.status

    get(WARM_UP)
    # valgrind runs the program itself, under ``env``: callgrind_control finds it by its pid.
    pid = str(process.pid)
    subprocess.run(["callgrind_control", "--instr=on", pid], check=True, capture_output=True)
    get(requests)
    subprocess.run(["callgrind_control", "--instr=off", pid], check=True, capture_output=True)
    subprocess.run(["callgrind_control", "--dump", pid], check=True, capture_output=True)
    connection.close()
    totals = []
    for dump in out.parent.glob(out.name + ".*"):  # the dumps asked for; ``out`` itself is written at exit
        annotated = subprocess.run(["callgrind_annotate", str(dump)], check=True, capture_output=True, text=True).stdout
        found = re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", annotated)
        totals.append(int(found.group(1).replace(",", "")) if found else 0)
    return max(totals) / requests


def wait_for(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=5).connect()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the bare handler did not start under valgrind")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench/instructions.py needs valgrind")
    schema = max(number for number, *_ in MIGRATIONS)
    folder = CACHE / f"v{schema}-{SIZE}"
    facts = seed(folder, SIZE)
    work = Path(tempfile.mkdtemp(prefix="cps-instructions-"))
    figures: dict[str, list[float]] = {"service": [], "bare": []}
    try:
        for name in ("secret.key", "dev-idp-key.json", "service.sqlite3"):
            if (folder / name).exists():
                shutil.copy(folder / name, work / name)
        path = f"/v1/domains/{facts['domain']}"
        for run in range(args.runs):
            out = work / f"service-{run}.out"
            service, _, _ = serve(work, 18611, wrapper=callgrind(out))
            try:
                figures["service"].append(counted(service, 18611, path, facts["key"], args.requests, out))
                if run == 0:
                    body = http.client.HTTPConnection("127.0.0.1", 18611, timeout=300)
                    body.request("GET", path, headers={"Authorization": f"Bearer {facts['key']}"})
                    (work / "bare.json").write_bytes(body.getresponse().read())
            finally:
                service.terminate()
                service.wait()
            out = work / f"bare-{run}.out"
            (work / "bare.py").write_text(BARE)
            bare = subprocess.Popen([*callgrind(out), sys.executable, str(work / "bare.py"), "18612", str(work / "bare.json")],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_for(18612, bare)
                figures["bare"].append(counted(bare, 18612, path, facts["key"], args.requests, out))
            finally:
                bare.terminate()
                bare.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    service, bare = statistics.median(figures["service"]), statistics.median(figures["bare"])
    print(json.dumps({
        "service_instructions_per_request": round(service), "bare_instructions_per_request": round(bare),
        "bare_over_service": round(bare / service, 3), "runs": {k: [round(v) for v in vs] for k, vs in figures.items()},
        "load_average": os.getloadavg()[0],
    }, indent=2))


if __name__ == "__main__":
    main()
