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

Debian's Pebble 2.4 has no renewal information (ARI, RFC 9773) and names no ``caaIdentities``:
``Directory`` stands in front of it to add both (a fake ARI endpoint), serving the window a test
sets, and answers what a test wants the CA to say to a new order (a refused ``replaces``, a
paused hostname); every other request reaches Pebble through it.
"""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import http.server
import json
import os
import shutil
import ssl
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import trustme

from tests.patience import PATIENCE_SECONDS
from tests.servers.service import free_port

PEBBLE = shutil.which("pebble")


def missing() -> str | None:
    return None if PEBBLE else "needs Debian's pebble (apt-get install pebble; .ci/run installs it)"


class Pebble:
    def __init__(self, folder: Path, *, dns_server: str, eab: dict[str, str] | None = None,
                 ca: trustme.CA | None = None, alternate_roots: int = 0) -> None:
        """``ca``: the throwaway CA its HTTPS certificate comes from (another Pebble's, so that one
        bundle trusts both). ``alternate_roots``: that many roots besides its first, each offered as
        an alternate chain of every certificate (``PEBBLE_ALTERNATE_ROOTS``, ``Link: rel="alternate"``)."""
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.dns_server = dns_server
        self.eab = eab or {}
        self.alternate_roots = alternate_roots
        self._pick_ports()
        self.ca = ca = ca or trustme.CA()
        leaf = ca.issue_cert("127.0.0.1", "localhost")
        self.ca_bundle = folder / "pebble-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_bundle))
        leaf.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
        leaf.private_key_pem.write_to_path(str(folder / "key.pem"))
        self._ssl = ssl.create_default_context(cafile=str(self.ca_bundle))
        self.process: subprocess.Popen[bytes] | None = None

    def _pick_ports(self) -> None:
        self.port, self.management_port = free_port(), free_port()
        while self.management_port == self.port:  # the system may hand out a port it just freed again
            self.management_port = free_port()

    @property
    def directory_url(self) -> str:
        return f"https://127.0.0.1:{self.port}/dir"

    def start(self) -> Pebble:
        """Pebble binds the ports it is told only after seconds of making its keys, and another
        program may take one meanwhile (seen in a run: its management port): it is then started
        again on others, as tests/servers/postgres.py does."""
        for attempt in range(3):
            log_from = (self.folder / "pebble.log").stat().st_size if (self.folder / "pebble.log").exists() else 0
            try:
                return self._launch()
            except RuntimeError:
                taken = "address already in use" in (self.folder / "pebble.log").read_text()[log_from:]
                if attempt == 2 or not taken:
                    raise
                self._pick_ports()
        raise AssertionError("unreachable")

    def _launch(self) -> Pebble:
        config = {"pebble": {
            "listenAddress": f"127.0.0.1:{self.port}",
            "managementListenAddress": f"127.0.0.1:{self.management_port}",
            "certificate": str(self.folder / "cert.pem"), "privateKey": str(self.folder / "key.pem"),
            "httpPort": free_port(), "tlsPort": free_port(), "ocspResponderURL": "",
            "externalAccountBindingRequired": bool(self.eab), "externalAccountMACKeys": self.eab,
        }}
        (self.folder / "pebble.json").write_text(json.dumps(config))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PEBBLE_VA_NOSLEEP": "1",
               "PEBBLE_WFE_NONCEREJECT": "0", "PEBBLE_AUTHZREUSE": "0",
               "PEBBLE_ALTERNATE_ROOTS": str(self.alternate_roots)}
        with open(self.folder / "pebble.log", "ab") as log:
            assert PEBBLE is not None
            self.process = subprocess.Popen([PEBBLE, "-config", str(self.folder / "pebble.json"),
                                             "-dnsserver", self.dns_server], env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + PATIENCE_SECONDS
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

    def certificate_status(self, serial: int) -> str:
        """``Valid`` or ``Revoked``, as Pebble's management interface says of a serial number."""
        found = json.loads(self._get(f"https://127.0.0.1:{self.management_port}/cert-status-by-serial/{serial:x}"))
        return str(found["Status"])

    def root_pem(self, index: int = 0) -> str:
        """The root Pebble issues from this run (it makes a new one each start); ``index`` > 0: an
        alternate root's."""
        return self._get(f"https://127.0.0.1:{self.management_port}/roots/{index}").decode()

    def _get(self, url: str) -> bytes:
        with urllib.request.urlopen(url, context=self._ssl, timeout=5) as answer:
            return bytes(answer.read())


class Directory:
    """Pebble behind a front of its own, on HTTPS: the ACME directory the service is configured with.

    Every request is passed on to Pebble with the front's ``Host`` (Pebble builds its URLs from it,
    so the account's signed requests name the front's URLs, which Pebble then checks), and its
    answer passed back; on the way, what Debian's Pebble 2.4 lacks, or a test wants the CA to say:

    - the directory gains ``renewalInfo`` (ARI, RFC 9773), served here with the window a test sets,
      its ``Retry-After`` and ``explanationURL``, and ``meta.caaIdentities``;
    - a new order naming the certificate it replaces (``replaces``) can be refused with a problem
      a test sets (``refuse_replaces``): ``alreadyReplaced``, or "another account issued it";
    - new orders can be refused with a problem a test sets (``refuse_orders``), as a CA pausing a
      hostname does; and each new order's payload is kept (``orders``);
    - with ``profiles``, the directory's ``meta.profiles`` lists them (ACME profiles, which Pebble
      2.4 lacks): a new order naming one is passed on (Pebble ignores the field) and its order
      object, as every later read of it says, names the profile, as a CA's does; a new order naming
      a profile not listed is refused with ``invalidProfile``.
    """

    def __init__(self, pebble: Pebble, *, caa_identities: list[str] | None = None,
                 profiles: dict[str, str] | None = None) -> None:
        self.pebble = pebble
        self.caa_identities = caa_identities
        self.profiles = profiles
        self._profile_of: dict[str, str] = {}
        "The profile of each order, by the last part of its URL (Pebble's order and finalize URLs share it)."
        self.window: tuple[dt.datetime, dt.datetime] | None = None
        "The renewal window served for a certificate not in ``windows``; None: 404."
        self.windows: dict[str, tuple[dt.datetime, dt.datetime]] = {}
        "Windows by certificate id (RFC 9773 section 4.1)."
        self.retry_after: str | None = "21600"
        "The ``Retry-After`` of renewal information."
        self.explanation_url: str | None = None
        "The ``explanationURL`` of renewal information."
        self.asked: list[str] = []
        "The certificate ids renewal information was asked for."
        self.refuse_replaces: tuple[int, dict[str, str]] | None = None
        "(status, problem) answered to a new order naming ``replaces``."
        self.refuse_orders: tuple[int, dict[str, str]] | None = None
        "(status, problem) answered to every new order."
        self.orders: list[dict[str, object]] = []
        "The payload of each new order, refused or not."
        self.downloads: dict[str, str] = {}
        "Each certificate downloaded, as Pebble returned it (PEM), by its URL's path."
        directory = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/dir":
                    data = json.loads(directory._pass(self, "GET", "/dir", None)[2])
                    data["renewalInfo"] = f"{directory.url}/renewal-info"
                    if directory.caa_identities is not None:
                        data.setdefault("meta", {})["caaIdentities"] = directory.caa_identities
                    if directory.profiles is not None:
                        data.setdefault("meta", {})["profiles"] = directory.profiles
                    self._send(200, data)
                elif self.path.startswith("/renewal-info/") and directory.window_of(self.path.rsplit("/", 1)[1]):
                    directory.asked.append(self.path.rsplit("/", 1)[1])
                    start, end = directory.window_of(directory.asked[-1])
                    body: dict[str, object] = {"suggestedWindow": {"start": start.isoformat().replace("+00:00", "Z"),
                                                                   "end": end.isoformat().replace("+00:00", "Z")}}
                    if directory.explanation_url:
                        body["explanationURL"] = directory.explanation_url
                    self._send(200, body, retry_after=directory.retry_after)
                elif self.path.startswith("/renewal-info/"):
                    self._send(404, {"type": "about:blank"})
                else:
                    self._relay("GET", None)

            def do_HEAD(self) -> None:
                self._relay("HEAD", None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/order-plz":
                    payload = json.loads(_unbase64(json.loads(body)["payload"]) or b"{}")
                    directory.orders.append(payload)
                    refusal = directory.refuse_orders or (directory.refuse_replaces if "replaces" in payload else None)
                    profile = payload.get("profile")
                    if profile is not None and profile not in (directory.profiles or {}):
                        refusal = (400, {"type": "urn:ietf:params:acme:error:invalidProfile",
                                         "detail": f"profile {profile!r} is not offered"})
                    if refusal is not None:
                        self._send(refusal[0], refusal[1], content_type="application/problem+json")
                        return
                    if profile is not None:
                        self._relay("POST", body, profile=profile)
                        return
                self._relay("POST", body)

            def _relay(self, method: str, body: bytes | None, profile: str | None = None) -> None:
                status, headers, data = directory._pass(self, method, self.path, body)
                if self.path.startswith("/certZ/") and status == 200:
                    directory.downloads[self.path] = data.decode()
                data = directory._with_profile(self.path, headers, data, profile)
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(data)

            def _send(self, status: int, body: object, retry_after: str | None = None,
                      content_type: str = "application/json") -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                if retry_after:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        pebble.ca.issue_cert("127.0.0.1").configure_cert(context)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._server.server_address[1]}"
        self.directory_url = f"{self.url}/dir"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> Directory:
        self._thread.start()
        return self

    def _with_profile(self, path: str, headers: list[tuple[str, str]], data: bytes, profile: str | None) -> bytes:
        """An order object as a CA offering profiles answers it: naming the profile it was ordered under."""
        if profile is not None:  # a new order: its URL is its Location
            location = {name.lower(): value for name, value in headers}.get("location", "")
            self._profile_of[location.rsplit("/", 1)[-1]] = profile
        elif path.startswith(("/my-order/", "/finalize-order/")):
            profile = self._profile_of.get(path.rsplit("/", 1)[-1])
        if profile is None:
            return data
        try:
            order = json.loads(data)
        except ValueError:
            return data
        return json.dumps({**order, "profile": profile}).encode() if isinstance(order, dict) else data

    def window_of(self, certificate_id: str) -> tuple[dt.datetime, dt.datetime] | None:
        return self.windows.get(certificate_id, self.window)

    def _pass(self, request: http.server.BaseHTTPRequestHandler, method: str, path: str,
              body: bytes | None) -> tuple[int, list[tuple[str, str]], bytes]:
        """``request`` sent on to Pebble, with the front's ``Host``: its answer."""
        connection = http.client.HTTPSConnection("127.0.0.1", self.pebble.port, context=self.pebble._ssl, timeout=30)
        try:
            headers = {"Host": self.url.removeprefix("https://")}
            for name in ("Content-Type", "User-Agent", "Accept"):
                if request.headers.get(name):
                    headers[name] = request.headers[name]
            connection.request(method, path, body=body, headers=headers)
            answer = connection.getresponse()
            return answer.status, answer.getheaders(), answer.read()
        finally:
            connection.close()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _unbase64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
