"""Raw TLS and plain-TCP servers on 127.0.0.1 for the HTTPS scan, each in a thread with its own loop.

``TlsServer`` completes TLS handshakes and picks the certificate by the SNI name the client sends
(``serve(hostname, leaf)``, a ``trustme`` leaf; any other name gets a default certificate from a
throwaway CA), so one server and one port stand for any number of sites. After a handshake it
reads until the client closes: ``connections`` lists ``(sni, bytes_received)`` per connection
that completed a handshake, to show that a scanner sent no application data.

With ``answer``, it writes those bytes (an HTTP answer, or not) after the client's first bytes.
``TcpServer`` speaks no TLS: it reads the client's first bytes and answers ``answer`` (an HTTP
error by default, like a plain HTTP server on port 443), or with ``answer=None`` never answers.

``self_signed(hostname)`` is a certificate for the name signed by its own key, ready to serve.
``closed_port()`` is a port on 127.0.0.1 where nothing listens. Both servers serve from
construction until ``stop()`` and are context managers.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import datetime as dt
import socket
import ssl
import tempfile
import threading
import time
from pathlib import Path
from typing import Self

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.patience import PATIENCE_SECONDS

PLAIN_HTTP_ANSWER = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def self_signed(hostname: str) -> ssl.SSLContext:
    """A server context presenting a self-signed certificate for ``hostname`` (valid now)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as folder:
        pem = Path(folder) / "self-signed.pem"
        pem.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            + cert.public_bytes(serialization.Encoding.PEM)
        )
        context.load_cert_chain(pem)
    return context


class _LoopServer(abc.ABC):
    """An asyncio stream server on 127.0.0.1 in a thread of its own; subclasses say what it does
    with each connection."""

    def __init__(self, tls: ssl.SSLContext | None, name: str) -> None:
        self._tls = tls
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self.port = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        if not self._ready.wait(5):
            raise RuntimeError(f"the {name} server did not start")

    @abc.abstractmethod
    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection."""

    async def _guarded(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._connected(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass  # the client went away; that is what scanners do
        finally:
            writer.transport.abort()

    def _run(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            server = await asyncio.start_server(self._guarded, "127.0.0.1", 0, ssl=self._tls)
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            async with server:
                await self._stop.wait()

        asyncio.run(serve())

    def stop(self) -> None:
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


class TlsServer(_LoopServer):
    def __init__(self, answer: bytes | None = None) -> None:
        """With ``answer``, each connection gets those bytes once the client has sent something."""
        self.answer = answer
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()
        self._connections: list[tuple[str | None, int]] = []
        self._sni: dict[int, str | None] = {}
        default = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        trustme.CA().issue_cert("default.tls-test.com").configure_cert(default)
        default.sni_callback = self._pick
        super().__init__(default, "tls-server")

    def serve(self, hostname: str, leaf: trustme.LeafCert | ssl.SSLContext) -> None:
        """Present ``leaf`` (with its chain; or a ready server context) to clients asking for
        ``hostname`` by SNI."""
        if isinstance(leaf, ssl.SSLContext):
            context = leaf
        else:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            leaf.configure_cert(context)
        with self._lock:
            self._contexts[hostname] = context

    @property
    def connections(self) -> list[tuple[str | None, int]]:
        """``(sni, bytes received)`` for every connection whose handshake completed, oldest first."""
        with self._lock:
            return list(self._connections)

    async def connections_to(self, sni: str, count: int = 1,
                             timeout: float = PATIENCE_SECONDS) -> list[tuple[str | None, int]]:
        """The finished connections for ``sni`` once ``count`` have closed (without blocking the caller's loop)."""
        deadline = time.monotonic() + timeout
        while len(found := [c for c in self.connections if c[0] == sni]) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(found)} of {count} connections to {sni} closed within {timeout} s")
            await asyncio.sleep(0.01)
        return found

    def _pick(self, connection: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
        with self._lock:
            self._sni[id(connection)] = server_name
            chosen = self._contexts.get(server_name or "")
        if chosen is not None:
            connection.context = chosen

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._lock:  # the server side of an SSLObject does not keep the name the client asked for
            sni = self._sni.pop(id(writer.get_extra_info("ssl_object")), None)
        received = 0
        try:
            while chunk := await reader.read(65536):
                received += len(chunk)
                if self.answer is not None:
                    writer.write(self.answer)
                    await writer.drain()
                    writer.close()
                    break
        finally:
            with self._lock:
                self._connections.append((sni, received))


class TcpServer(_LoopServer):
    def __init__(self, answer: bytes | None = PLAIN_HTTP_ANSWER) -> None:
        self.answer = answer
        super().__init__(None, "tcp-server")

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        if self.answer is None:
            with contextlib.suppress(OSError):
                while await reader.read(65536):
                    pass
            return
        writer.write(self.answer)
        await writer.drain()
