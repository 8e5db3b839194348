"""Let's Encrypt's test CA, Pebble (``apt-get install pebble``), on loopback.

Pebble validates DNS-01 by asking its ``-dnsserver`` (the DNS lab's Unbound, which follows the
customer's CNAME into the delegation zone as a CA's resolver does) for the TXT record at
``_acme-challenge.<hostname>``. ``PEBBLE_VA_NOSLEEP`` skips its artificial delays,
``PEBBLE_WFE_NONCEREJECT=0`` its random nonce refusals, ``PEBBLE_AUTHZREUSE=0`` its reuse of
earlier authorizations (every order is validated). Its HTTPS certificate comes from a throwaway
CA (trustme) the service is told to trust (``[provider.acme] ca_bundle``); the root it issues from
is read from its management interface (``root_pem``).

``stop`` and ``start`` again give an outage; Pebble forgets everything between runs. With
``eab`` it requires External Account Binding with those (kid, base64url key) pairs.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import trustme

from tests.servers.service import free_port

PEBBLE = shutil.which("pebble")


def missing() -> str | None:
    return None if PEBBLE else "needs Debian's pebble (apt-get install pebble; .ci/run installs it)"


class Pebble:
    def __init__(self, folder: Path, *, dns_server: str, eab: dict[str, str] | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.dns_server = dns_server
        self.eab = eab or {}
        self.port, self.management_port = free_port(), free_port()
        self.directory_url = f"https://127.0.0.1:{self.port}/dir"
        ca = trustme.CA()
        leaf = ca.issue_cert("127.0.0.1", "localhost")
        self.ca_bundle = folder / "pebble-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_bundle))
        leaf.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
        leaf.private_key_pem.write_to_path(str(folder / "key.pem"))
        self._ssl = ssl.create_default_context(cafile=str(self.ca_bundle))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Pebble:
        config = {"pebble": {
            "listenAddress": f"127.0.0.1:{self.port}",
            "managementListenAddress": f"127.0.0.1:{self.management_port}",
            "certificate": str(self.folder / "cert.pem"), "privateKey": str(self.folder / "key.pem"),
            "httpPort": free_port(), "tlsPort": free_port(), "ocspResponderURL": "",
            "externalAccountBindingRequired": bool(self.eab), "externalAccountMACKeys": self.eab,
        }}
        (self.folder / "pebble.json").write_text(json.dumps(config))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PEBBLE_VA_NOSLEEP": "1",
               "PEBBLE_WFE_NONCEREJECT": "0", "PEBBLE_AUTHZREUSE": "0"}
        with open(self.folder / "pebble.log", "ab") as log:
            assert PEBBLE is not None
            self.process = subprocess.Popen([PEBBLE, "-config", str(self.folder / "pebble.json"),
                                             "-dnsserver", self.dns_server], env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                self._get(self.directory_url)
                return self
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError(f"Pebble did not start: {(self.folder / 'pebble.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def root_pem(self) -> str:
        """The root Pebble issues from this run (it makes a new one each start)."""
        return self._get(f"https://127.0.0.1:{self.management_port}/roots/0").decode()

    def _get(self, url: str) -> bytes:
        with urllib.request.urlopen(url, context=self._ssl, timeout=5) as answer:
            return bytes(answer.read())
