"""The documented trial of the ACME path on one machine (docs/acme-trial.md) works as written,
without sudo: Pebble, Unbound, the service with ``kind = "acme"`` and Caddy in a folder of their
own, a sign-up whose two records are published in the zone file, and a TLS handshake with the
customer's hostname on Caddy, checked against Pebble's root.

The page's blocks are run by bash as written: the first (everything started, in the background)
from the checkout, in a session of its own, whose shell then waits to run the last (its jobs
stopped, the folder removed); the two between (the customer's side, the operator's) in the trial's
folder. Only the ports change (free ones: the page's fixed ones may be taken), the folder (a
temporary one for ``~/acme-trial``) and ``python "$CPS/app.py"`` (this checkout's, with this
interpreter). Before the second block the test waits, up to tests/patience.py's bound, for what a
person would see before going on: every part listening. Where the page says to ask again when the
check answered ``pending``, the test does, within the same bound.
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

import attrs
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

pytestmark = pytest.mark.skipif(any(shutil.which(tool, path=f"{os.environ['PATH']}:/usr/sbin") is None for tool in TOOLS),
                                reason="needs Debian's pebble, unbound, caddy, openssl and curl")


class Trial:
    """The trial's folder, its ports, and the shell of the first block, which holds its jobs."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="cps-acme-trial-"))
        self.ports = {port: str(free_port()) for port in PORTS}
        self.signal = Path(tempfile.mkdtemp(prefix="cps-acme-trial-stop-")) / "stop"
        "A FIFO the first block's shell reads before it runs the last block (``stop``)."
        os.mkfifo(self.signal)
        self.shell: subprocess.Popen[bytes] | None = None

    def port(self, documented: str) -> int:
        return int(self.ports[documented])

    def script(self, text: str) -> str:
        text = re.sub(r"\b(" + "|".join(PORTS) + r")\b", lambda found: self.ports[found.group()], text)
        text = text.replace("~/acme-trial", f'"{self.folder}"')
        return text.replace('python "$CPS/app.py"', f'"{sys.executable}" "$CPS/app.py"')

    def start(self) -> None:
        """The first block, from the checkout, in a session of its own; then its shell waits for
        ``stop`` to run the last block, whose ``kill %1 ...`` names that shell's jobs."""
        script = f"set -euo pipefail\n{self.script(START)}\nread -r _ < '{self.signal}'\nset +e\n{self.script(STOP)}"
        with open(self.signal.parent / "start.log", "ab") as log:
            self.shell = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdout=log, stderr=log,
                                          start_new_session=True)

    def run(self, text: str) -> subprocess.CompletedProcess[str]:
        """A later block in the trial's folder, to its end (failing the test on a non-zero exit)."""
        ran = subprocess.run(["bash", "-c", f"CPS={ROOT}\nset -euo pipefail\n{self.script(text)}"], cwd=self.folder,
                             check=False, capture_output=True, text=True, timeout=4 * PATIENCE_SECONDS)
        assert ran.returncode == 0, ran.stdout + ran.stderr + self.logs()
        return ran

    def logs(self) -> str:
        logs = sorted([*self.folder.glob("*.log"), self.signal.parent / "start.log"])
        return "".join(f"\n--- {log.name}\n{log.read_text()[-3000:]}" for log in logs if log.exists())

    def stop(self) -> tuple[int | None, bool]:
        """The last block run (by the first block's shell): its exit status, and whether every
        process the first block started has ended."""
        assert self.shell is not None
        try:
            writer = os.open(self.signal, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: the shell is not reading
        except OSError:
            return self.shell.poll(), not group_alive(self.shell.pid)
        os.write(writer, b"stop\n")
        os.close(writer)
        status = self.shell.wait(PATIENCE_SECONDS)
        return status, not group_alive(self.shell.pid)

    def clean_up(self) -> None:
        """Whatever the last block left (nothing, when it worked)."""
        if self.shell is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.shell.pid, signal.SIGKILL)
            self.shell.wait(30)
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.signal.parent, ignore_errors=True)


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


@attrs.frozen
class Ran:
    customer: subprocess.CompletedProcess[str]
    "The second block (the sign-up and its records)."
    operator: subprocess.CompletedProcess[str]
    "The third (the check, the certificate and the handshake)."
    zone: str
    "The customer's zone file after them."
    stop_status: int | None
    "The last block's exit status."
    ended: bool
    "Whether every process the first block started had ended after it."
    folder_left: bool


@pytest.fixture(scope="module")
def ran():
    """The page's blocks run from the first to the last, with what each left; every process ended
    and the folder removed afterwards, whatever happened. Prints the seconds from the first command
    to the handshake (``-s``): a person pasting the blocks takes that, and the time to read them."""
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
        print(f"\nACME trial: {time.monotonic() - started:.1f} s from the first command to the handshake")
        zone = (trial.folder / "example.com.zone").read_text()
        status, ended = trial.stop()
        yield Ran(customer, operator, zone, status, ended, trial.folder.exists())
    finally:
        trial.clean_up()


def test_the_sign_up_answers_the_two_records_which_are_published_in_the_zone_file(ran):
    cname, txt, reloaded, flushed = ran.customer.stdout.splitlines()
    assert re.fullmatch(r"_acme-challenge\.shop\.example\.com\. 60 IN CNAME [a-z0-9]+\.acme\.saas\.test\.", cname)
    assert re.fullmatch(r'_service-verify\.shop\.example\.com\. 60 IN TXT "service-domain-verification=[0-9a-f]+"', txt)
    assert ran.zone.endswith(f"{cname}\n{txt}\n")
    assert reloaded == "ok" and flushed.startswith("ok"), ran.customer.stdout


def test_the_check_finds_the_records_verified_and_orders_the_certificate(ran):
    """Active at once, or pending on a machine too slow for ``wait_seconds`` (then the page's
    recheck, run by the test, waits for it: the handshake below says whether it came)."""
    checked = json.loads(ran.operator.stdout.splitlines()[0])
    assert checked["status"] == "verified" and checked["certificate"]["status"] in ("active", "pending"), checked


def test_caddy_serves_the_hostname_with_a_certificate_pebbles_root_vouches_for(ran):
    """curl's request passed (it refuses a handshake it cannot check against ``--cacert``), and
    openssl saw the hostname's certificate, from Pebble's intermediate, checked against the root."""
    healthz, subject, issuer, verified = ran.operator.stdout.splitlines()[1:]
    assert healthz == '{"status": "ok"}', ran.operator.stdout
    assert subject == "subject=CN = shop.example.com", ran.operator.stdout
    assert issuer.startswith("issuer=CN = Pebble Intermediate CA "), ran.operator.stdout
    assert verified.strip() == "Verify return code: 0 (ok)", ran.operator.stdout


def test_the_last_block_ends_every_process_the_first_started_and_removes_the_folder(ran):
    assert len(re.findall(r"&\n", START)) == 4 and STOP.startswith("kill %1 %2 %3 %4;"), (START, STOP)
    assert (ran.stop_status, ran.ended, ran.folder_left) == (0, True, False)
