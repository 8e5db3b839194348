"""The built-in authoritative server, on its sockets: UDP and TCP on ``[delegation_dns] listen``.

Both are bound (sockets.py) with ``SO_REUSEPORT``, so that every service process on a machine binds
the same address and the kernel spreads queries between them; any of them answers the same (answers.py).
TCP carries several queries per connection (RFC 7766), each framed by its 2-byte length; an idle
connection is closed after ``IDLE_SECONDS``, and past ``MAX_CONNECTIONS`` new ones are closed at
once. UDP queries waiting for the store past ``MAX_PENDING`` are dropped: a resolver asks again.
While it answers, its heartbeat (heartbeat.py) says which serial of the zone it answers from.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from typing import TYPE_CHECKING, cast

from core.delegation_dns.answers import Answers
from core.delegation_dns.heartbeat import Heartbeat
from core.delegation_dns.transfers import Transfers

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.clock import Clock
    from core.config import DelegationDnsConfig
    from core.metrics import Metrics
    from store import Store

log = logging.getLogger("delegation_dns")

IDLE_SECONDS = 10.0
MAX_CONNECTIONS = 256
MAX_PENDING = 1024
LISTEN_BACKLOG = 128


class DelegationServer:
    """Answers on the sockets ``bind`` made, from ``start`` until ``stop``."""

    def __init__(self, config: DelegationDnsConfig, store: Store, clock: Clock, sockets: list[socket.socket], *,
                 idle_seconds: float = IDLE_SECONDS, max_connections: int = MAX_CONNECTIONS,
                 metrics: Metrics | None = None, serial: Callable[[], int] | None = None,
                 process: str | None = None) -> None:
        """``serial``: the serial it answers from, run on the store's thread (the store's own, as
        ``Answers`` reads the store at each query); ``process``: its name in the confirmations."""
        self.answers = Answers(config, store, clock)
        # Issue 47 item 4 (hidden primary): transfers and the secondaries' signed queries, when there are secondaries.
        self.transfers = Transfers(config, store, metrics) if config.secondaries else None
        self.heartbeat = Heartbeat(store, serial or store.delegation_zone.serial, process=process)
        self.sockets = sockets
        self.idle_seconds = idle_seconds
        self.max_connections = max_connections
        self._udp: _Udp | None = None
        self._tcp: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        udp, tcp = self.sockets
        loop = asyncio.get_running_loop()
        _, self._udp = await loop.create_datagram_endpoint(lambda: _Udp(self.answers, self.transfers), sock=udp)
        self._tcp = await asyncio.start_server(self._serve, sock=tcp, backlog=LISTEN_BACKLOG)
        await self.heartbeat.start()

    async def stop(self) -> None:
        """Stop answering: queries in progress are abandoned (the resolver asks again)."""
        await self.heartbeat.stop()
        if self._tcp is not None:
            self._tcp.close()
        if self._udp is not None:
            self._udp.close()
        tasks = [*self._connections, *(self._udp.pending if self._udp else ())]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or len(self._connections) >= self.max_connections:
            writer.close()
            return
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        try:
            while True:
                async with asyncio.timeout(self.idle_seconds):
                    (size,) = struct.unpack("!H", await reader.readexactly(2))
                    wire = await reader.readexactly(size)
                    # Issue 47 item 4: a transfer (or a secondary's signed query) goes to transfers.py.
                    if (sent := await _transferred(self.transfers, wire, peer, udp=False)) is not None:
                        writer.writelines([struct.pack("!H", len(message)) + message for message in sent])
                        await writer.drain()
                        continue
                    answer = await _answered(self.answers, wire, udp=False)
                    if answer is None:  # not a query: nothing more to say to this client
                        return
                    writer.write(struct.pack("!H", len(answer)) + answer)
                    await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            return
        except asyncio.CancelledError:  # stop(): ended here, since asyncio (3.11) logs a cancelled handler
            return
        finally:
            self._connections.discard(task)
            writer.close()


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, answers: Answers, transfers: Transfers | None = None) -> None:
        self.answers = answers
        self.transfers = transfers
        self.pending: set[asyncio.Task[None]] = set()
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        if len(self.pending) >= MAX_PENDING:
            return
        task = asyncio.ensure_future(self._answer(data, addr))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _answer(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        # Issue 47 item 4: IXFR over UDP (the SOA alone), a secondary's signed SOA query.
        if (sent := await _transferred(self.transfers, data, addr, udp=True)) is not None:
            if sent and self.transport is not None:
                self.transport.sendto(sent[0], addr)
            return
        answer = await _answered(self.answers, data, udp=True)
        if answer is not None and self.transport is not None:
            self.transport.sendto(answer, addr)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def _transferred(transfers: Transfers | None, wire: bytes, peer: object, *, udp: bool) -> list[bytes] | None:
    """The messages of a transfer (issue 47 item 4), or None when ``wire`` is not one (or there are no
    secondaries): answers.py answers it. A bug is logged and answered by nothing."""
    if transfers is None:
        return None
    try:
        return await transfers.answer(wire, peer, udp=udp)
    except Exception:
        log.exception("delegation DNS: no answer to a transfer")
        return []


async def _answered(answers: Answers, wire: bytes, *, udp: bool) -> bytes | None:
    """The answer, or none when building it failed: a bug is logged, and the server goes on."""
    try:
        return await answers.answer(wire, udp=udp)
    except Exception:
        log.exception("delegation DNS: no answer to a query")
        return None
