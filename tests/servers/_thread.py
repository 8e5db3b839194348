"""Run a Tornado application on loopback in a thread with its own event loop.

Test servers live outside the event loop of the test itself, like a real remote service.
"""

from __future__ import annotations

import asyncio
import ssl
import threading

import tornado.web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets


class _CountingServer(HTTPServer):
    """Counts the connections it accepts (whether clients keep and reuse them)."""

    def initialize(self, *args, counted: ThreadedServer, **kwargs) -> None:  # type: ignore[override]
        super().initialize(*args, **kwargs)
        self.counted = counted

    def handle_stream(self, stream, address) -> None:  # type: ignore[override]
        self.counted.connections += 1
        super().handle_stream(stream, address)


class ThreadedServer:
    def __init__(self, app: tornado.web.Application, *, ssl_options: ssl.SSLContext | None = None) -> None:
        self.app = app
        self.ssl_options = ssl_options
        self.sockets = bind_sockets(0, "127.0.0.1")
        self.port = self.sockets[0].getsockname()[1]
        self.url = f"{'https' if ssl_options else 'http'}://127.0.0.1:{self.port}"
        self.connections = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            server = self._http = _CountingServer(self.app, counted=self, ssl_options=self.ssl_options)
            server.add_sockets(self.sockets)
            self._started.set()
            await self._stop.wait()
            server.stop()

        asyncio.run(serve())

    def start(self) -> ThreadedServer:
        self._thread.start()
        self._started.wait(5)
        return self

    def close_connections(self) -> None:
        """Close every open connection from the server's side, as servers do with idle ones."""
        asyncio.run_coroutine_threadsafe(self._http.close_all_connections(), self._loop).result(5)

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)
