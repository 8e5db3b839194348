"""The built-in authoritative server, on its sockets: UDP and TCP on ``[delegation_dns] listen``.

Both are bound (sockets.py) with ``SO_REUSEPORT``, so that every service process on a machine binds
the same address and the kernel spreads queries between them; any of them answers the same, from
its copy of the zone in memory (view.py), which no query waits for: UDP queries are read and
answered inside the event loop's callback for the socket, without a task of their own.

What keeps one client from taking the server from the others: UDP answers are rate-limited per
source prefix (rrl.py); TCP carries several queries per connection (RFC 7766), each framed by its
2-byte length, a connection with no complete query for ``tcp_idle_seconds`` is closed, and new
ones past ``tcp_max_per_source`` from one address or ``tcp_max_connections`` in all are closed at
once. Every query, answer and refusal is counted (``DnsMetrics``, on ``/metrics``).

With ``[delegation_dns] secondaries``, zone transfers and the secondaries' signed queries go to
transfers.py (the hidden primary). While it answers, its heartbeat (heartbeat.py) says which
serial of the zone it answers from: the view's.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from typing import TYPE_CHECKING

from core.delegation_dns.answers import Answers
from core.delegation_dns.heartbeat import Heartbeat
from core.delegation_dns.rrl import RateLimiter, Verdict
from core.delegation_dns.transfers import Transfers, question_type
from core.delegation_dns.view import CHECK_SECONDS, ZoneView
from core.delegation_dns.wire import truncated
from core.metrics import DnsMetrics

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.clock import Clock
    from core.config import DelegationDnsConfig
    from core.metrics import Metrics
    from store import Store

log = logging.getLogger("delegation_dns")

LISTEN_BACKLOG = 128
TRANSFERS = (251, 252)  # IXFR, AXFR


class DelegationServer:
    """Answers on the sockets ``bind`` made, from ``start`` until ``stop``. ``view`` is the zone it
    answers from (its ``serial``, and ``on_load`` to hear of each load)."""

    def __init__(self, config: DelegationDnsConfig, store: Store, clock: Clock, sockets: list[socket.socket], *,
                 metrics: Metrics | None = None, idle_seconds: float | None = None,
                 max_connections: int | None = None, max_per_source: int | None = None,
                 check_seconds: float = CHECK_SECONDS, monotonic: Callable[[], float] = time.monotonic,
                 process: str | None = None) -> None:
        """``process``: the server's name in the confirmations (heartbeat.py)."""
        self.view = ZoneView(config, store, clock, check_seconds=check_seconds)
        self.answers = Answers(config, self.view, clock)
        self.metrics = metrics.dns if metrics is not None else DnsMetrics()
        self.transfers = Transfers(config, store, metrics) if config.secondaries else None
        self._secondaries = {str(address) for address in self.transfers.secondaries} if self.transfers else set()
        self.heartbeat = Heartbeat(store, lambda: self.view.serial, process=process)
        self.view.on_load(lambda _serial: self._beat())
        self.limiter = RateLimiter(config.rrl_responses_per_second, config.rrl_slip, monotonic=monotonic)
        self.sockets = sockets
        self.idle_seconds = config.tcp_idle_seconds if idle_seconds is None else idle_seconds
        self.max_connections = config.tcp_max_connections if max_connections is None else max_connections
        self.max_per_source = config.tcp_max_per_source if max_per_source is None else max_per_source
        self._udp: _Udp | None = None
        self._tcp: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._per_source: dict[str, int] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        self._answering = False
        "Heartbeats, and transfers asked over UDP, under way."

    async def start(self) -> None:
        await self.view.start()
        udp, tcp = self.sockets
        self._udp = _Udp(self, udp)
        self._tcp = await asyncio.start_server(self._serve, sock=tcp, backlog=LISTEN_BACKLOG)
        await self.heartbeat.start()
        self._answering = True

    def _beat(self) -> None:
        """The view loaded a change: said at once, so that no confirmation waits for the next look."""
        if self._answering:
            self._tasks.add(task := asyncio.ensure_future(self.heartbeat.beat(changed_only=True)))
            task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        """Stop answering: queries in progress are abandoned (the resolver asks again)."""
        self._answering = False
        await self.heartbeat.stop()
        if self._tcp is not None:
            self._tcp.close()
        if self._udp is not None:
            self._udp.close()
        tasks = [*self._connections, *self._tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.view.stop()

    def answer(self, query: bytes, *, udp: bool) -> bytes | None:
        """The answer's bytes, counted; None when there is none to give (not a query, or a bug:
        logged, and the server goes on)."""
        try:
            answered = self.answers.answer(query, udp=udp)
        except Exception:
            log.exception("delegation DNS: no answer to a query")
            self.metrics.dropped["error"] += 1
            return None
        if answered is None:
            self.metrics.dropped["not_a_query"] += 1
            return None
        answer, rcode = answered
        if rcode < len(self.metrics.rcodes):
            self.metrics.rcodes[rcode] += 1
        return answer

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        peer = writer.get_extra_info("peername")
        source = str(peer[0]) if peer else ""
        held = self._per_source.get(source, 0)
        refused = "per_source" if held >= self.max_per_source else "total" if len(self._connections) >= self.max_connections else ""
        if task is None or refused:
            self.metrics.tcp_refused[refused or "total"] += 1
            writer.close()
            return
        self._connections.add(task)
        self._per_source[source] = held + 1
        self.metrics.tcp_open += 1
        try:
            while True:
                async with asyncio.timeout(self.idle_seconds):
                    (size,) = struct.unpack("!H", await reader.readexactly(2))
                    query = await reader.readexactly(size)
                    self.metrics.queries["tcp"] += 1
                    if (sent := await self.transferred(query, peer, udp=False)) is not None:
                        writer.writelines([struct.pack("!H", len(message)) + message for message in sent])
                        await writer.drain()
                        continue
                    answer = self.answer(query, udp=False)
                    if answer is None:  # not a query: nothing more to say to this client
                        return
                    writer.write(struct.pack("!H", len(answer)) + answer)
                    await writer.drain()
        except TimeoutError:
            self.metrics.tcp_idle_closed += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        except asyncio.CancelledError:  # stop(): ended here, since asyncio (3.11) logs a cancelled handler
            return
        finally:
            self._connections.discard(task)
            self.metrics.tcp_open -= 1
            if (left := self._per_source.pop(source) - 1) > 0:
                self._per_source[source] = left
            writer.close()


    async def transferred(self, query: bytes, peer: object, *, udp: bool) -> list[bytes] | None:
        """The messages of a transfer, or of a secondary's signed query (transfers.py); None when
        ``query`` is neither, or there are no secondaries: answered as any other. A bug is logged
        and answered by nothing."""
        if self.transfers is None:
            return None
        try:
            return await self.transfers.answer(query, peer, udp=udp)
        except Exception:
            log.exception("delegation DNS: no answer to a transfer")
            return []

    def _transfer_over_udp(self, query: bytes, addr: tuple[str, int], sock: socket.socket) -> bool:
        """An IXFR or a secondary's signed query over UDP: answered in a task of its own (it reads the
        store), and True; False for any other query, answered inline."""
        if self.transfers is None or not (question_type(query) in TRANSFERS
                                          or (addr[0] in self._secondaries and query[10:12] != b"\0\0")):
            return False

        async def answer() -> None:
            sent = await self.transferred(query, addr, udp=True)
            if sent is None:
                if (answer := self.answer(query, udp=True)) is not None:
                    sock.sendto(answer, addr)
            elif sent:
                sock.sendto(sent[0], addr)

        self._tasks.add(task := asyncio.ensure_future(answer()))
        task.add_done_callback(self._tasks.discard)
        return True


class _Udp:
    """The UDP socket read straight from the event loop: each readiness, up to ``BATCH`` queries
    read and each answered inline (nothing to wait for, so no task, no queue to overflow). Half the
    cost of an asyncio datagram transport, which reads one datagram per turn of the loop. An
    answer the socket's send buffer has no room for is dropped, as a query lost on the way would
    be: the resolver asks again."""

    BATCH = 64

    def __init__(self, server: DelegationServer, sock: socket.socket) -> None:
        self.server = server
        self.metrics = server.metrics
        self.limiter = server.limiter
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(sock, self._readable)

    def _readable(self) -> None:
        sock, metrics, verdict_of, answer_of = self.sock, self.metrics, self.limiter.verdict, self.server.answer
        transfer = self.server._transfer_over_udp
        for _ in range(self.BATCH):
            try:
                data, addr = sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # an ICMP error for an earlier answer, reported here: nothing to read
                continue
            metrics.queries["udp"] += 1
            verdict = verdict_of(addr[0])
            if verdict is Verdict.DROP:
                metrics.rate_limited["dropped"] += 1
                metrics.dropped["rate_limited"] += 1
                continue
            if transfer(data, addr, sock):
                continue
            answer = answer_of(data, udp=True)
            if answer is None:
                continue
            if verdict is Verdict.SLIP:
                metrics.rate_limited["slipped"] += 1
                answer = truncated(answer)
            try:
                sock.sendto(answer, addr)
            except OSError:
                metrics.dropped["unsent"] += 1

    def close(self) -> None:
        self.loop.remove_reader(self.sock)
        self.sock.close()
