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

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.clock import Clock
    from core.config import DelegationDnsConfig
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
                 serial: Callable[[], int] | None = None, process: str | None = None) -> None:
        """``serial``: the serial it answers from, run on the store's thread (the store's own, as
        ``Answers`` reads the store at each query); ``process``: its name in the confirmations."""
        self.answers = Answers(config, store, clock)
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
        _, self._udp = await loop.create_datagram_endpoint(lambda: _Udp(self.answers), sock=udp)
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
        try:
            while True:
                async with asyncio.timeout(self.idle_seconds):
                    (size,) = struct.unpack("!H", await reader.readexactly(2))
                    answer = await _answered(self.answers, await reader.readexactly(size), udp=False)
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
    def __init__(self, answers: Answers) -> None:
        self.answers = answers
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
        answer = await _answered(self.answers, data, udp=True)
        if answer is not None and self.transport is not None:
            self.transport.sendto(answer, addr)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def _answered(answers: Answers, wire: bytes, *, udp: bool) -> bytes | None:
    """The answer, or none when building it failed: a bug is logged, and the server goes on."""
    try:
        return await answers.answer(wire, udp=udp)
    except Exception:
        log.exception("delegation DNS: no answer to a query")
        return None
