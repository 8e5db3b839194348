"""An HTTP client pool of one's own, for each outside system the service calls.

Tornado's shared ``AsyncHTTPClient()`` is one pool per event loop: a slow identity provider, edge
provider or webhook receiver could fill it and stall the others. Each caller therefore keeps its
own bounded ``SimpleAsyncHTTPClient`` (``force_instance``), made on first use for the running loop,
since a client belongs to one loop (tests run several).
"""

from __future__ import annotations

import asyncio
from typing import Any

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
            self._client = SimpleAsyncHTTPClient(force_instance=True, max_clients=self.max_clients, **self.options)
            self._loop = loop
        return self._client

    def close(self) -> None:
        """Let go of the pool (it is made again on next use)."""
        if self._client is not None:
            self._client.close()
            self._client = None
