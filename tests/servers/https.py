"""A real HTTPS receiver on 127.0.0.1, with a certificate for a DNS name from a throwaway CA.

Tests reach it as ``receiver.url()`` (``https://hooks.receiver-test.com:<port>/hook``) once the
DNS test server answers ``receiver.hostname`` with 127.0.0.1, ``[network] allow_private_ranges``
holds ``127.0.0.0/8`` and ``[network] ca_bundle`` is ``receiver.ca_pem_path``. It runs in a thread
with its own event loop, like a real remote service, and answers any path and method.

What it answers: the planned answers first (``plan``), one per request, then the standing one
(``respond_with``, 200 and no body at first). ``received`` lists every request as
``(headers, body, at)``, ``at`` being ``time.monotonic()`` when it arrived. All of it is
thread-safe; ``reset()`` forgets requests and plans. It serves from construction until ``stop()``
(``start()`` just returns it, like the other test servers' ``start``); it is also a context manager.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import NamedTuple, Self

import tornado.web
import trustme
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from tests.patience import PATIENCE_SECONDS


class Received(NamedTuple):
    headers: dict[str, str]
    "Header names as Tornado normalises them (``X-Signature``); repeated headers joined by commas."
    body: bytes
    at: float
    "``time.monotonic()`` on arrival."


class Answer(NamedTuple):
    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    "Seconds to wait before answering (other requests are served meanwhile)."
    location: str | None = None
    close: bool = False
    "Answer with ``Connection: close``: the client may not send another request on this connection."
    drop: bool = False
    "Close the connection without answering, as a server does with a kept connection it gave up on."


class _Handler(tornado.web.RequestHandler):
    def initialize(self, receiver: HttpsReceiver) -> None:
        self.receiver = receiver

    async def _answer(self) -> None:
        peer = self.request.connection.context.address  # type: ignore[union-attr]
        answer = self.receiver._arrived(self.request.headers, self.request.body, peer)
        try:
            if answer.delay:
                try:  # a delay ends early when the receiver stops, so no handler outlives it
                    await asyncio.wait_for(self.receiver._stop.wait(), answer.delay)
                except TimeoutError:
                    pass
            if answer.drop:
                self.request.connection.stream.close()  # type: ignore[union-attr]
                return
            self.set_status(answer.status)
            if answer.location is not None:
                self.set_header("Location", answer.location)
            if answer.close:
                self.set_header("Connection", "close")
            self.finish(answer.body)
        finally:
            self.receiver._left()

    get = post = put = patch = delete = _answer


class HttpsReceiver:
    def __init__(self, hostname: str = "hooks.receiver-test.com", *, ca: trustme.CA | None = None,
                 idle_timeout: float | None = None) -> None:
        self.hostname = hostname
        self.idle_timeout = idle_timeout
        "Seconds after which the receiver closes a kept-alive connection with no request."
        self.ca = ca or trustme.CA()
        self._folder = Path(tempfile.mkdtemp(prefix="https-receiver-"))
        self.ca_pem_path = str(self._folder / "ca.pem")
        self.ca.cert_pem.write_to_path(self.ca_pem_path)
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(hostname).configure_cert(self._tls)
        self._sockets = bind_sockets(0, "127.0.0.1")
        self.port: int = self._sockets[0].getsockname()[1]
        self._lock = threading.Lock()
        self._received: list[Received] = []
        self._peers: set[tuple[str, int]] = set()
        self._plans: deque[Answer] = deque()
        self._standing = Answer()
        self.in_flight = 0
        self.peak_in_flight = 0
        "The most requests being answered at once since the last ``reset()``."
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"https-receiver-{self.port}", daemon=True)
        self._thread.start()
        if not self._started.wait(PATIENCE_SECONDS):
            raise RuntimeError("the HTTPS receiver did not start")

    # -- controls (any thread) ------------------------------------------------------------------

    def url(self, path: str = "/hook") -> str:
        return f"https://{self.hostname}:{self.port}{path}"

    @property
    def received(self) -> list[Received]:
        """A copy of the requests received so far, oldest first."""
        with self._lock:
            return list(self._received)

    @property
    def connections(self) -> int:
        """How many connections requests came on since the last ``reset()``."""
        with self._lock:
            return len(self._peers)

    def respond_with(self, status: int, *, body: bytes = b"", delay: float = 0.0, location: str | None = None) -> None:
        """The answer to every request that has no planned answer."""
        with self._lock:
            self._standing = Answer(status, body, delay, location)

    def plan(self, answers: list[int | Answer]) -> None:
        """Answers for the next requests, in order (``plan([500, 500, 200])``); then the standing one."""
        with self._lock:
            self._plans.extend(Answer(a) if isinstance(a, int) else a for a in answers)

    def reset(self) -> None:
        """Forget requests and plans; answer 200 again."""
        with self._lock:
            self._received.clear()
            self._peers.clear()
            self._plans.clear()
            self._standing = Answer()
            self.peak_in_flight = self.in_flight

    async def wait_for(self, count: int, timeout: float = PATIENCE_SECONDS) -> list[Received]:
        """The requests once at least ``count`` have arrived (without blocking the caller's loop)."""
        deadline = time.monotonic() + timeout
        while len(received := self.received) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(received)} of {count} requests arrived within {timeout} s")
            await asyncio.sleep(0.01)
        return received

    # -- called by the handler, on the receiver's thread ----------------------------------------

    def _arrived(self, headers: object, body: bytes, peer: tuple[str, int]) -> Answer:
        with self._lock:
            self._peers.add(peer)
            self._received.append(Received(dict(headers), body, time.monotonic()))  # type: ignore[call-overload]
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            return self._plans.popleft() if self._plans else self._standing

    def _left(self) -> None:
        with self._lock:
            self.in_flight -= 1

    # -- lifetime -------------------------------------------------------------------------------

    def _run(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            # No access log: it would cost more than the answer itself in a benchmark.
            app = tornado.web.Application([(r".*", _Handler, {"receiver": self})], log_function=lambda _: None)
            server = HTTPServer(app, ssl_options=self._tls, idle_connection_timeout=self.idle_timeout)
            server.add_sockets(self._sockets)
            self._started.set()
            await self._stop.wait()
            server.stop()
            await server.close_all_connections()

        asyncio.run(serve())

    def start(self) -> HttpsReceiver:
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(5)
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
