"""NSD (Debian package nsd) and Knot DNS (knot) on loopback as secondaries of the delegation zone,
the built-in server their hidden primary (core/delegation_dns/transfers.py, notify.py): each asks
the primary for the zone by IXFR (AXFR when it has none), signed with one TSIG key, and takes NOTIFY
from it signed with the same key. Their configurations are the ones docs/acme.md shows, with the
test's folder and ports.

Each is started in a temporary folder on a free port; ``start`` returns once it answers at all
(REFUSED or SERVFAIL while it has no copy of the zone yet).
"""

from __future__ import annotations

import abc
import shutil
import subprocess
import time
from pathlib import Path

import dns.exception
import dns.message
import dns.query

from tests.patience import PATIENCE_SECONDS
from tests.servers.knot import knot_common
from tests.servers.service import free_port

KEY_NAME = "cps-acme-transfer"
ALGORITHM = "hmac-sha256"


def missing() -> bool:
    return shutil.which("nsd") is None or shutil.which("knotd") is None


class Secondary(abc.ABC):
    """One secondary: its name, its port on 127.0.0.1, and its process."""

    name = ""
    log_name = ""

    def __init__(self, folder: Path, zone: str, primary_port: int, secret: str) -> None:
        self.folder = folder
        self.zone = zone
        self.primary_port = primary_port
        self.secret = secret
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        "As ``[delegation_dns] secondaries`` lists it."
        self._process: subprocess.Popen[bytes] | None = None

    @abc.abstractmethod
    def command(self) -> list[str]:
        """Writes the server's configuration in its folder: the command that runs it."""

    def start(self) -> Secondary:
        with open(self.folder / f"{self.name}.stderr", "wb") as log:  # the child keeps its own copy
            self._process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + PATIENCE_SECONDS
        while not self._answering():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start: {self.logs()}")
            time.sleep(0.05)
        return self

    def _answering(self) -> bool:
        try:
            self.query(self.zone, "SOA")
        except (dns.exception.Timeout, OSError):
            return False
        return True

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)

    def logs(self) -> str:
        return "\n".join(path.read_text(errors="replace") for path in sorted(self.folder.glob("*.stderr"))
                         + sorted(self.folder.glob("*.log")))

    def query(self, name: str, rdtype: str) -> dns.message.Message:
        """Its answer to ``name``/``rdtype``, over UDP."""
        return dns.query.udp(dns.message.make_query(name, rdtype), "127.0.0.1", port=self.port, timeout=1)


class NsdSecondary(Secondary):
    name = "nsd"

    def command(self) -> list[str]:
        (self.folder / "nsd.conf").write_text(f"""\
server:
    ip-address: 127.0.0.1
    port: {self.port}
    username: ""
    chroot: ""
    zonesdir: "{self.folder}"
    zonelistfile: "{self.folder}/zone.list"
    xfrdfile: "{self.folder}/xfrd.state"
    xfrdir: "{self.folder}"
    pidfile: "{self.folder}/nsd.pid"
    database: ""
    logfile: "{self.folder}/nsd.log"
    server-count: 1
    verbosity: 2
remote-control:
    control-enable: no
key:
    name: "{KEY_NAME}"
    algorithm: {ALGORITHM}
    secret: "{self.secret}"
zone:
    name: "{self.zone}"
    zonefile: "{self.zone}.zone"
    request-xfr: 127.0.0.1@{self.primary_port} {KEY_NAME}
    allow-notify: 127.0.0.1 {KEY_NAME}
""")
        return ["nsd", "-d", "-c", str(self.folder / "nsd.conf")]


class KnotSecondary(Secondary):
    name = "knot"

    def command(self) -> list[str]:
        (self.folder / "db").mkdir()
        (self.folder / "knot.conf").write_text(knot_common(self.folder, self.port, self.secret, KEY_NAME) + f"""\
remote:
  - id: cps-primary
    address: 127.0.0.1@{self.primary_port}
    key: {KEY_NAME}
acl:
  - id: cps-notify
    address: 127.0.0.1
    key: {KEY_NAME}
    action: notify
zone:
  - domain: {self.zone}
    storage: "{self.folder}"
    file: "{self.zone}.zone"
    master: cps-primary
    acl: cps-notify
""")
        return ["knotd", "-c", str(self.folder / "knot.conf")]
