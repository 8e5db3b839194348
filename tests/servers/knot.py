"""Knot DNS (``knotd``, Debian package knot) on loopback: the primary nameserver of one zone that
takes RFC 2136 updates signed with one TSIG key, as an operator's would be (docs/acme.md, "The
delegation zone's DNS"). Its configuration is the one shown there, with the test's folder and port.

Started in a temporary folder on a free port; ready once it answers the zone's SOA.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from pathlib import Path

import dns.exception
import dns.message
import dns.query

from tests.patience import PATIENCE_SECONDS
from tests.servers.service import free_port

KEY_NAME = "cps-acme"
ALGORITHM = "hmac-sha256"


def missing() -> bool:
    return shutil.which("knotd") is None


def knot_common(folder: Path, port: int, secret: str, key_name: str = KEY_NAME) -> str:
    """What every knotd configuration here starts with: its address, folders, log and the TSIG key."""
    return f"""\
server:
    listen: 127.0.0.1@{port}
    rundir: "{folder}"
database:
    storage: "{folder / 'db'}"
log:
  - target: stderr
    any: info
key:
  - id: {key_name}
    algorithm: {ALGORITHM}
    secret: {secret}
"""


class KnotServer:
    def __init__(self, folder: Path, zone: str) -> None:
        self.folder = folder
        self.zone = zone
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        "As ``[delegation_dns] server`` takes it."
        self.secret = base64.b64encode(os.urandom(32)).decode()
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> KnotServer:
        (self.folder / "db").mkdir()
        (self.folder / f"{self.zone}.zone").write_text(
            f"$ORIGIN {self.zone}.\n"
            "@ 60 IN SOA ns1.saas.example. hostmaster.saas.example. 1 3600 600 1209600 60\n"
            "@ 3600 IN NS ns1.saas.example.\n"
        )
        (self.folder / "knot.conf").write_text(knot_common(self.folder, self.port, self.secret) + f"""\
acl:
  - id: cps-acme-update
    key: {KEY_NAME}
    action: update
    update-type: [TXT]
zone:
  - domain: {self.zone}
    storage: "{self.folder}"
    file: "{self.zone}.zone"
    acl: cps-acme-update
""")
        with open(self.folder / "knot.log", "wb") as log:  # the child keeps its own copy
            self._process = subprocess.Popen(["knotd", "-c", str(self.folder / "knot.conf")],
                                             stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + PATIENCE_SECONDS
        while not self._serving():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"knotd did not start: {(self.folder / 'knot.log').read_text()}")
            time.sleep(0.05)
        return self

    def _serving(self) -> bool:
        try:
            return bool(self.query(self.zone, "SOA").answer)
        except (dns.exception.Timeout, OSError):
            return False

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)

    def query(self, name: str, rdtype: str) -> dns.message.Message:
        """Its answer to ``name``/``rdtype``, over UDP."""
        return dns.query.udp(dns.message.make_query(name, rdtype), "127.0.0.1", port=self.port, timeout=1)
