"""The documented trial of the ACME path on one machine (docs/acme-trial.md) works as written,
without sudo: Pebble, Unbound, the service with ``kind = "acme"`` and Caddy in a folder of their
own, a sign-up whose two records are published in the zone file, and a TLS handshake with the
customer's hostname on Caddy, checked against Pebble's root.

The page's blocks are run by bash as written: the first (everything started, in the background)
from the checkout, in a session of its own that the test ends; the next two (the customer's side,
the operator's) in the trial's folder. Only the ports change (free ones, the page's fixed ones
being anyone's), the folder (a temporary one for ``~/acme-trial``) and ``python "$CPS/app.py"``
(this checkout's, with this interpreter). Between them the test waits, up to tests/patience.py's
bound, for what a person would see before going on: every part listening.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import dns.message
import dns.query
import pytest

from tests.patience import PATIENCE_SECONDS
from tests.servers.service import free_port
from tests.test_readme import TRIES, shell_blocks

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "acme-trial.md").read_text()
START, CUSTOMER, OPERATOR, STOP = shell_blocks(PAGE)
"The page's four blocks: everything started; the sign-up and its records; the certificate; the stop."
PORTS = ("14000", "15000", "5300", "5301", "8080", "8081", "8443", "8444")
"""The page's fixed ports: Pebble and its management, Unbound, the delegation zone's DNS, the service,
Caddy's HTTP and HTTPS, the TLS terminator endpoints."""
TOOLS = ("pebble", "unbound", "unbound-control", "caddy", "openssl", "curl")

pytestmark = pytest.mark.skipif(any(shutil.which(tool) is None for tool in TOOLS),
                                reason="needs Debian's pebble, unbound, caddy, openssl and curl")


class Trial:
    """The trial's folder, its ports, and the shell holding its background jobs."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="cps-acme-trial-"))
        self.ports = {port: str(free_port()) for port in PORTS}
        self.jobs: subprocess.Popen[bytes] | None = None

    def port(self, documented: str) -> int:
        return int(self.ports[documented])

    def script(self, text: str) -> str:
        text = re.sub(r"\b(" + "|".join(PORTS) + r")\b", lambda found: self.ports[found.group()], text)
        text = text.replace("~/acme-trial", f'"{self.folder}"')
        text = text.replace('python "$CPS/app.py"', f'"{sys.executable}" "$CPS/app.py"')
        return "set -euo pipefail\n" + text

    def start(self) -> None:
        """The first block, from the checkout; its shell waits for its jobs (ended by ``stop``)."""
        with open(self.folder / "start.log", "ab") as log:
            self.jobs = subprocess.Popen(["bash", "-c", self.script(START) + "wait\n"], cwd=ROOT, stdout=log,
                                         stderr=log, start_new_session=True)

    def run(self, text: str) -> subprocess.CompletedProcess[str]:
        """A later block in the trial's folder, to its end (failing the test on a non-zero exit)."""
        ran = subprocess.run(["bash", "-c", f"CPS={ROOT}\n" + self.script(text)], cwd=self.folder, check=False,
                             capture_output=True, text=True, timeout=4 * PATIENCE_SECONDS)
        assert ran.returncode == 0, ran.stdout + ran.stderr + self.logs()
        return ran

    def logs(self) -> str:
        return "".join(f"\n--- {log.name}\n{log.read_text()[-3000:]}" for log in sorted(self.folder.glob("*.log")))

    def stop(self) -> None:
        """What ``kill %1 %2 %3 %4`` does in the page's terminal: every job the first block started."""
        if self.jobs is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.jobs.pid, signal.SIGTERM)
            self.jobs.wait(30)
            until(lambda: not group_alive(self.jobs.pid), "every process of the trial ended", self)


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
        return True
    except ProcessLookupError:
        return False


def until(condition, what: str, trial: Trial) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {PATIENCE_SECONDS} s: {what}" + trial.logs())
        time.sleep(0.1)


def accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def resolves(port: int) -> bool:
    """Unbound answers (from the customer's zone file)."""
    with contextlib.suppress(OSError, dns.exception.Timeout):
        return bool(dns.query.udp(dns.message.make_query("example.com", "SOA"), "127.0.0.1", port=port, timeout=1).answer)
    return False


def answers(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5):
        return True
    return False


def listening(trial: Trial) -> None:
    """What the page's first block starts, each answering."""
    until(lambda: accepts(trial.port("14000")) and accepts(trial.port("15000")), "Pebble listening", trial)
    until(lambda: resolves(trial.port("5300")), "Unbound answering", trial)
    until(lambda: answers(f"http://127.0.0.1:{trial.port('8080')}/healthz"), "the service answering", trial)
    until(lambda: accepts(trial.port("8444")) and resolves(trial.port("5300")), "the terminator endpoints", trial)
    until(lambda: "serving initial configuration" in (trial.folder / "caddy.log").read_text(), "Caddy serving", trial)


@pytest.fixture(scope="module")
def trial():
    """The page's blocks run to the handshake: their output, and the seconds it took from the first
    command (as a person pasting the blocks one after the other would take, less their reading)."""
    trial = Trial()
    started = time.monotonic()
    try:
        trial.start()
        listening(trial)
        customer = trial.run(CUSTOMER)
        certificate, handshake = OPERATOR.split("# 10. ", 1)
        active = f"""
for i in $(seq {TRIES}); do
  curl -s -X POST $B/v1/domains/$D/recheck -H "Authorization: Bearer $KEY" | grep -q '"certStatus":"active"' && break
  sleep 0.1
done
"""  # what the page says to do if the check answered pending
        operator = trial.run("B=http://127.0.0.1:8080\n" + certificate + active + "# 10. " + handshake)
        seconds = time.monotonic() - started
        print(f"\nACME trial: {seconds:.1f} s from the first command to the handshake")
        yield customer, operator, trial
    finally:
        trial.stop()
        shutil.rmtree(trial.folder, ignore_errors=True)


def test_the_sign_up_answers_the_two_records_which_are_published_in_the_zone_file(trial):
    customer, _, trial = trial
    cname, txt, reloaded, flushed = customer.stdout.splitlines()
    assert re.fullmatch(r"_acme-challenge\.shop\.example\.com\. 60 IN CNAME [a-z0-9]+\.acme\.saas\.test\.", cname)
    assert re.fullmatch(r'_service-verify\.shop\.example\.com\. 60 IN TXT "service-domain-verification=[0-9a-f]+"', txt)
    assert (trial.folder / "example.com.zone").read_text().endswith(f"{cname}\n{txt}\n")
    assert reloaded == "ok" and flushed.startswith("ok"), customer.stdout


def test_the_check_finds_the_records_and_pebble_issues_the_certificate(trial):
    _, operator, _ = trial
    checked = json.loads(operator.stdout.splitlines()[0])
    assert (checked["status"], checked["certificate"]["status"]) == ("verified", "active"), checked


def test_caddy_serves_the_hostname_with_a_certificate_pebbles_root_vouches_for(trial):
    """curl's request passed (it refuses a handshake it cannot check against ``--cacert``), and
    openssl saw the hostname's certificate, from Pebble's intermediate, checked against the root."""
    _, operator, _ = trial
    healthz, subject, issuer, verified = operator.stdout.splitlines()[1:]
    assert healthz == '{"status": "ok"}', operator.stdout
    assert subject == "subject=CN = shop.example.com", operator.stdout
    assert issuer.startswith("issuer=CN = Pebble Intermediate CA "), operator.stdout
    assert verified.strip() == "Verify return code: 0 (ok)", operator.stdout


def test_the_stop_ends_the_four_jobs_the_first_block_started():
    assert STOP.strip() == "kill %1 %2 %3 %4"
    assert len(re.findall(r"&\n", START)) == 4, START
