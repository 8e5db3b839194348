"""The delegation zone's server as a service process runs it, on each backend: the built-in server
on a Store of its own, in a thread with its own event loop (as a process apart), on a free port
of 127.0.0.1, and the values published through another Store on the same database (``zone``).
The tests ask it with dnspython over real UDP and TCP.

``nameserver``: Knot DNS serving the zone and taking RFC 2136 updates (tests/servers/knot.py),
one for the session (each test its own names).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Iterator
from typing import Any

import attrs
import dns.message
import dns.query
import pytest

from core.config import ConfigError, DelegationDnsConfig
from core.delegation_dns.records import StoredRecords
from core.delegation_dns.server import DelegationServer
from core.delegation_dns.sockets import bind
from store import Store
from tests.fakes import FakeClock
from tests.servers.delegation import InThread
from tests.servers.knot import KnotServer
from tests.servers.service import free_port
from tests.store.conftest import open_store, pg_database, pg_databases, store_backend  # noqa: F401

ZONE = "acme.saas.example"
NAMESERVERS = ["ns1.saas.example", "ns2.saas.example"]


def listening() -> tuple[int, list[socket.socket]]:
    """A port of 127.0.0.1 and the server's UDP and TCP sockets bound to it. A port ``free_port``
    found free may be taken before it is bound here (another worker's server): then another is tried."""
    for _ in range(20):
        port = free_port()
        try:
            return port, bind(f"127.0.0.1:{port}")
        except ConfigError:
            continue
    raise RuntimeError("no port of 127.0.0.1 was free for both UDP and TCP in 20 tries")


class RunningServer:
    """A ``DelegationServer`` answering on 127.0.0.1 from a thread of its own, until ``stop``."""

    def __init__(self, store: Store, clock: FakeClock, **options: Any) -> None:
        """``options``: the ``[delegation_dns]`` keys to set, and the server's own options."""
        self.port, sockets = listening()
        keys = {field.name for field in attrs.fields(DelegationDnsConfig)}
        self.config = DelegationDnsConfig(zone=ZONE, nameservers=NAMESERVERS, listen=f"127.0.0.1:{self.port}",
                                          **{key: value for key, value in options.items() if key in keys})
        self.store = store
        self.server = DelegationServer(self.config, store, clock, sockets,
                                       **{key: value for key, value in options.items() if key not in keys})
        self.serving = InThread(self.server)

    def start(self) -> RunningServer:
        self.serving.start()
        return self

    def stop(self) -> None:
        """Stops it (a test may stop it before the fixture does)."""
        if self.serving.thread.is_alive():
            self.serving.stop()

    def udp(self, name: str, rdtype: str = "TXT", *, source: str | None = None, **query: Any) -> dns.message.Message:
        return dns.query.udp(dns.message.make_query(name, rdtype, **query), "127.0.0.1", port=self.port, timeout=5,
                             source=source)

    def tcp(self, name: str, rdtype: str = "TXT", **query: Any) -> dns.message.Message:
        return dns.query.tcp(dns.message.make_query(name, rdtype, **query), "127.0.0.1", port=self.port, timeout=5)

    def udp_bytes(self, wire: bytes) -> bytes:
        """The raw answer to raw bytes sent over UDP."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(5)
            sock.sendto(wire, ("127.0.0.1", self.port))
            return sock.recv(65535)

    def connect(self, source: str = "127.0.0.1") -> socket.socket:
        """A TCP connection from ``source`` (any address of 127.0.0.0/8 is this machine's)."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=5, source_address=(source, 0))


def ask_tcp(sock: socket.socket, message: dns.message.Message) -> dns.message.Message:
    """One query on an open TCP connection, framed by its length."""
    wire = message.to_wire()
    sock.sendall(struct.pack("!H", len(wire)) + wire)
    (size,) = struct.unpack("!H", receive(sock, 2))
    return dns.message.from_wire(receive(sock, size))


def receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("the server closed the connection")
        data += chunk
    return data


class Zone:
    """The server, and the challenge records as the ACME client publishes them, from another process."""

    def __init__(self, server: RunningServer, records: StoredRecords, clock: FakeClock) -> None:
        self.server = server
        self.records = records
        self.clock = clock

    def publish(self, name: str, *values: str) -> None:
        for value in values:
            asyncio.run(self.records.publish(name, value))

    def withdraw(self, name: str, value: str) -> None:
        asyncio.run(self.records.withdraw(name, value))


@pytest.fixture
def serve(open_store, clock) -> Iterator[Any]:  # noqa: F811 - open_store is the fixture imported above
    """Starts servers, each on a Store of its own, on the test's database; stops them after the test."""
    running: list[RunningServer] = []

    def start(**options: Any) -> RunningServer:
        running.append(RunningServer(open_store(), clock, **options).start())
        return running[-1]

    yield start
    for server in running:
        server.stop()


@pytest.fixture
def zone(serve, open_store, clock) -> Zone:  # noqa: F811
    return Zone(serve(), StoredRecords(ZONE, open_store(), clock), clock)


@pytest.fixture(scope="session")
def nameserver(tmp_path_factory) -> Iterator[KnotServer]:
    server = KnotServer(tmp_path_factory.mktemp("knot"), ZONE).start()
    yield server
    server.stop()
