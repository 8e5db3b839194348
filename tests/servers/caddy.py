"""Debian's Caddy (``apt-get install caddy``) as the reverse proxy in front of a service process.

It runs the repository's ``deploy/Caddyfile``, the one docs/operating/reverse-proxy.md shows, as it
is: only its ``{$...}`` placeholders are filled, from Caddy's environment. The site is a name under
``.localhost``, which Caddy certifies with its own local CA (never a public one, and never added to
this machine's trust store: the Caddyfile says ``skip_install_trust``); clients trust that CA's root
through ``ssl_context()``. Caddy listens on free loopback ports, has no admin endpoint, and keeps
its storage (the CA among it) in the test's folder.

``fetch`` speaks HTTP/1.1 to it, or to the service directly, from a chosen loopback source address:
Linux routes all of 127.0.0.0/8 to ``lo``, so 127.0.0.2 and 127.0.0.3 are two client IPs on one
machine.
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from tests.patience import PATIENCE_SECONDS
from tests.servers.service import free_port

ROOT = Path(__file__).resolve().parent.parent.parent
CADDYFILE = ROOT / "deploy" / "Caddyfile"
CADDY = shutil.which("caddy")


class CaddyProxy:
    def __init__(self, folder: Path, *, upstream: str, site: str = "cps.localhost", caddyfile: Path = CADDYFILE,
                 env: dict[str, str] | None = None) -> None:
        """``caddyfile``: deploy/Caddyfile, or another of deploy/ with the same placeholders (and
        those of ``env``, e.g. deploy/Caddyfile.portal-and-customers)."""
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.caddyfile = caddyfile
        self.site = site
        self.https_port = free_port()
        self.http_port = free_port()
        self.url = f"https://{site}:{self.https_port}"
        self.log = folder / "caddy.log"
        self.root_ca = folder / "data" / "caddy" / "pki" / "authorities" / "local" / "root.crt"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(folder),
            "XDG_DATA_HOME": str(folder / "data"),  # certificates and the local CA
            "XDG_CONFIG_HOME": str(folder / "config"),  # Caddy's autosave.json
            "CPS_SITE": site,
            "CPS_UPSTREAM": upstream,
            "CPS_BIND": "127.0.0.1",
            "CPS_HTTP_PORT": str(self.http_port),
            "CPS_HTTPS_PORT": str(self.https_port),
            "CPS_CADDY_ADMIN": "off",
            **(env or {}),
        }
        self.process: subprocess.Popen | None = None

    def start(self) -> CaddyProxy:
        assert CADDY is not None, "caddy is not installed"
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [CADDY, "run", "--config", str(self.caddyfile), "--adapter", "caddyfile"],
                cwd=self.folder, env=self.env, stdout=out, stderr=subprocess.STDOUT,
            )
        self._wait_until_serving()
        return self

    def _wait_until_serving(self) -> None:
        """Until its local CA exists and the site answers a TLS handshake with a certificate it signed."""
        deadline = time.monotonic() + PATIENCE_SECONDS
        while True:
            try:
                with (
                    socket.create_connection(("127.0.0.1", self.https_port), timeout=1) as sock,
                    self.ssl_context().wrap_socket(sock, server_hostname=self.site),
                ):
                    return
            except (OSError, ssl.SSLError):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError("caddy did not start:\n" + self.log.read_text()) from None
                time.sleep(0.1)

    def ssl_context(self) -> ssl.SSLContext:
        """A client's TLS settings trusting Caddy's local CA (and nothing else)."""
        return ssl.create_default_context(cafile=str(self.root_ca))

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


class Response(NamedTuple):
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def cookies(self) -> dict[str, str]:
        """Each ``Set-Cookie`` by cookie name, whole (value and attributes)."""
        return {line.split("=", 1)[0].strip(): line for line in self.headers.get_all("Set-Cookie") or []}


def fetch(
    origin: str, method: str, path: str, *, source: str = "127.0.0.1", headers: dict[str, str] | None = None,
    body: bytes | Iterable[bytes] | None = None, context: ssl.SSLContext | None = None,
) -> Response:
    """One request on a new connection to ``origin`` (``https://name:port`` or ``http://...``), whose
    host is reached at 127.0.0.1 (the ``.localhost`` names need no resolver), from ``source``. A body
    given as an iterable of chunks is sent with ``Transfer-Encoding: chunked``."""
    parts = urlsplit(origin)
    connection = _Pinned(parts.hostname, parts.port, source=source, context=context, tls=parts.scheme == "https")
    chunked = body is not None and not isinstance(body, bytes)
    try:
        connection.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
        answer = connection.getresponse()
        return Response(answer.status, answer.headers, answer.read())
    finally:
        connection.close()


class _Pinned(http.client.HTTPSConnection):
    """Connects to 127.0.0.1 from ``source``; names the origin's host in SNI and ``Host``."""

    def __init__(self, host: str, port: int, *, source: str, context: ssl.SSLContext | None, tls: bool) -> None:
        super().__init__(host, port, timeout=10, source_address=(source, 0), context=context)
        self.tls_context = context or ssl.create_default_context()
        self.tls = tls
        if not tls:
            self.default_port = 80

    def connect(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), self.timeout, self.source_address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self.tls_context.wrap_socket(sock, server_hostname=self.host) if self.tls else sock
