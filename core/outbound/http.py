"""An HTTP client pool of one's own, for each outside system the service calls.

Tornado's shared ``AsyncHTTPClient()`` is one pool per event loop: a slow identity provider, edge
provider or webhook receiver could fill it and stall the others. Each caller therefore keeps its
own bounded ``SimpleAsyncHTTPClient`` (``force_instance``), made on first use for the running loop,
since a client belongs to one loop (tests run several). ``KeepAliveClient`` is the same idea for
destinations the service calls often (webhook receivers, the edge provider's API), with
connections kept and reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
from tornado.http1connection import HTTP1Connection, HTTP1ConnectionParameters
from tornado.httputil import (
    HTTPHeaders,
    HTTPInputError,
    HTTPMessageDelegate,
    RequestStartLine,
    ResponseStartLine,
)
from tornado.iostream import IOStream, StreamClosedError
from tornado.netutil import Resolver
from tornado.tcpclient import TCPClient

if TYPE_CHECKING:
    from tornado.simple_httpclient import SimpleAsyncHTTPClient


class OwnClient:
    def __init__(self, *, max_clients: int, **options: Any) -> None:
        self.max_clients = max_clients
        self.options = options
        self._client: SimpleAsyncHTTPClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> SimpleAsyncHTTPClient:
        """The pool of the running loop."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self.close()
            # Tornado's client with the first request, not on import: see core/identity/oidc.py.
            from tornado.simple_httpclient import SimpleAsyncHTTPClient

            self._client = SimpleAsyncHTTPClient(force_instance=True, max_clients=self.max_clients, **self.options)
            self._loop = loop
        return self._client

    def close(self) -> None:
        """Let go of the pool (it is made again on next use)."""
        if self._client is not None:
            self._client.close()
            self._client = None


MAX_HEADER_BYTES = 64 * 1024


@attrs.frozen
class Answer:
    code: int
    body: bytes
    "At most ``max_body_bytes`` of what was sent."
    truncated: bool
    "More than ``max_body_bytes`` was sent; the rest was not read and the connection was closed."
    headers: HTTPHeaders = attrs.Factory(HTTPHeaders)


class _BodyTooLong(HTTPInputError):
    """Ends the reading of an answer over the cap (Tornado then closes the connection quietly)."""


class _Reader(HTTPMessageDelegate):
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.start_line: ResponseStartLine | None = None
        self.headers: HTTPHeaders | None = None
        self.chunks: list[bytes] = []
        self.size = 0
        self.truncated = False
        self.finished = False

    def headers_received(self, start_line: Any, headers: HTTPHeaders) -> None:
        self.start_line, self.headers = start_line, headers

    def data_received(self, chunk: bytes) -> None:
        room = self.limit - self.size
        if room > 0:
            self.chunks.append(chunk[:room])
        self.size += len(chunk)
        if self.size > self.limit:
            # An endless answer must not keep the service reading (or waiting).
            self.truncated = True
            raise _BodyTooLong(f"answer longer than {self.limit} bytes; the rest is not read")

    def finish(self) -> None:
        self.finished = True

    def on_connection_close(self) -> None:
        pass

    def reusable(self) -> bool:
        """The answer was read whole and the server keeps the connection open for the next request."""
        return (
            self.finished and self.start_line is not None and self.headers is not None
            and self.start_line.version == "HTTP/1.1" and self.headers.get("Connection", "").lower() != "close"
        )


class _Given(Resolver):
    """Answers with addresses already looked up (and judged) by the caller."""

    def initialize(self, addresses: list[tuple[int, Any]]) -> None:
        self.addresses = addresses

    async def resolve(self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC) -> list[tuple[int, Any]]:
        return self.addresses


@attrs.define
class _Idle:
    stream: IOStream
    address: str
    since: float | None
    "When it was last used; None for a connection just made."


@attrs.define
class _LoopState:
    loop: asyncio.AbstractEventLoop
    slots: asyncio.Semaphore
    idle: dict[tuple[str, int], list[_Idle]] = attrs.Factory(dict)

    def count(self) -> int:
        return sum(len(streams) for streams in self.idle.values())


class KeepAliveClient:
    """HTTP(S) requests over connections kept open and reused for the next request to the same place.

    Tornado's clients open a connection (TCP, then a full TLS handshake) for every request, which
    costs more CPU than the request itself: deliveries to one webhook receiver would spend most of
    the service's time in handshakes. This client keeps a finished connection for
    ``idle_seconds`` (below the 5 s idle limit of common servers, so they rarely close it first)
    and at most ``max_clients`` requests run at once, each with one deadline covering the wait for
    a slot, connecting and the answer.

    The caller resolves the host and passes the addresses it allows: a kept connection is used
    only while its peer is still among them, so a name that changes its answer is obeyed at once.
    A kept connection the server closed meanwhile is noticed when it fails before any answer, and
    the request is sent once more on a new connection (as browsers do); a receiver may therefore,
    rarely, see a request twice, which webhooks allow anyway.
    """

    def __init__(self, *, max_clients: int, ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext] | None,
                 max_body_bytes: int, idle_seconds: float = 4.0) -> None:
        """``ssl_context`` None speaks plain HTTP (an edge provider's API on loopback, in tests); a
        function making it is called when the first connection is made: loading the system's CAs
        was 0.03 s of every start-up, before the first answer, with no request going out (issue 49)."""
        self.max_clients = max_clients
        self._tls = ssl_context
        self.max_body_bytes = max_body_bytes
        self.idle_seconds = idle_seconds
        self._state: _LoopState | None = None

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        if callable(self._tls):
            self._tls = self._tls()
        return self._tls

    def _of_loop(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            self.close()
            self._state = _LoopState(loop, asyncio.Semaphore(self.max_clients))
        return self._state

    def close(self) -> None:
        """Close the kept connections."""
        if self._state is not None:
            for kept in self._state.idle.values():
                for idle in kept:
                    with contextlib.suppress(Exception):  # the loop they belong to may be gone
                        idle.stream.close()
            self._state = None

    async def request(self, method: str, *, host: str, port: int, path: str, addresses: list[tuple[int, Any]],
                      headers: dict[str, str], body: bytes, timeout: float) -> Answer:
        """One request to ``host`` at one of ``addresses`` (``(family, sockaddr)`` pairs, in order).

        Raises ``RequestTimeout`` when the deadline passes, ``OSError`` (``ssl.SSLError`` included)
        when connecting fails, ``ConnectionError`` when the connection closes before an answer.
        """
        state = self._of_loop()
        allowed = {sockaddr[0] for _, sockaddr in addresses}
        phase = ["waiting for a free connection"]
        try:
            async with asyncio.timeout(timeout), state.slots:
                kept = self._take(state, (host, port), allowed)
                if kept is not None:
                    with contextlib.suppress(_Stale):  # else the server had closed it: a new connection, once
                        return await self._exchange(state, kept, method, host, port, path, headers, body, phase)
                phase[0] = "connecting"
                stream = await TCPClient(resolver=_Given(addresses=addresses)).connect(
                    host, port, ssl_options=self.ssl_context, timeout=timeout
                )
                fresh = _Idle(stream, stream.socket.getpeername()[0], since=None)
                return await self._exchange(state, fresh, method, host, port, path, headers, body, phase)
        except TimeoutError:
            raise RequestTimeout(phase[0]) from None
        except StreamClosedError as exc:
            raise (exc.real_error or ConnectionResetError("the connection closed")) from None

    async def _exchange(self, state: _LoopState, conn: _Idle, method: str, host: str, port: int, path: str,
                        headers: dict[str, str], body: bytes, phase: list[str]) -> Answer:
        reused = conn.since is not None
        phase[0] = "sending the request"
        http = HTTP1Connection(conn.stream, True, HTTP1ConnectionParameters(
            max_header_size=MAX_HEADER_BYTES, decompress=False,
        ))
        request_headers = HTTPHeaders(headers)
        default_port = 80 if self.ssl_context is None else 443
        request_headers["Host"] = host if port == default_port else f"{host}:{port}"
        request_headers["Content-Length"] = str(len(body))
        reader = _Reader(self.max_body_bytes)
        try:
            await http.write_headers(RequestStartLine(method, path, "HTTP/1.1"), request_headers, body)
            http.finish()
            phase[0] = "waiting for the answer"
            still_open = await http.read_response(reader)
        except StreamClosedError:
            conn.stream.close()
            if reused and reader.start_line is None:
                raise _Stale() from None
            raise
        except BaseException:
            conn.stream.close()  # a timeout, cancellation or unreadable answer: the connection is done
            raise
        if reader.start_line is None:  # closed, or something that is not HTTP
            conn.stream.close()
            if reused:
                raise _Stale()
            raise ConnectionResetError("no readable answer")
        if still_open and reader.reusable():
            self._keep(state, (host, port), _Idle(conn.stream, conn.address, time.monotonic()))
        else:
            conn.stream.close()
        return Answer(code=reader.start_line.code, body=b"".join(reader.chunks), truncated=reader.truncated,
                      headers=reader.headers or HTTPHeaders())

    def _take(self, state: _LoopState, key: tuple[str, int], allowed: set[str]) -> _Idle | None:
        kept = state.idle.get(key, [])
        oldest = time.monotonic() - self.idle_seconds
        while kept:
            idle = kept.pop()  # the most recently used is the likeliest still open
            if idle.since is not None and idle.since >= oldest and not idle.stream.closed() and idle.address in allowed:
                return idle
            idle.stream.close()
        return None

    def _keep(self, state: _LoopState, key: tuple[str, int], idle: _Idle) -> None:
        oldest = time.monotonic() - self.idle_seconds
        for kept in state.idle.values():
            while kept and (kept[0].since or 0) < oldest:
                kept.pop(0).stream.close()
        if state.count() >= self.max_clients:
            idle.stream.close()
            return
        state.idle.setdefault(key, []).append(idle)


class _Stale(Exception):
    """A kept connection failed before any answer: the server had closed it."""


class RequestTimeout(Exception):
    def __init__(self, phase: str) -> None:
        super().__init__(phase)
        self.phase = phase
        "What was under way: connecting, waiting for the answer, ..."
