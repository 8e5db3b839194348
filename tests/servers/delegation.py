"""The delegation zone's built-in server (core/delegation_dns/server.py) answering from a thread with
an event loop of its own, as another service process would, until ``stop``."""

from __future__ import annotations

import asyncio
import threading

from core.delegation_dns.server import DelegationServer


class InThread:
    def __init__(self, server: DelegationServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(5)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()
