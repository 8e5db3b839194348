"""Each process's built-in server says, in the store, which serial of the zone it answers from:
at start, as soon as the serial it answers from moves, and at least every ``HEARTBEAT_SECONDS``;
at stop it says it no longer answers. A new value is confirmed at every server once each heard
from lately answers from the serial that added it (confirm.py); a process that stopped without
saying (killed, crashed) is no longer heard from, and no longer waited for.

Where the serial comes from is the server's business (``serial``, run on the store's thread): a
server that reads the store at each query answers from the store's serial; one that answers from
a view in memory, from the view's, and calls ``beat`` once it loaded a change.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.delegation_dns.confirm import HEARTBEAT_SECONDS, wall_clock
from store import unavailable_reason

if TYPE_CHECKING:
    from store import Store

log = logging.getLogger("delegation_dns")

#: How often the serial a server answers from is looked at: a change is said within this.
LOOK_SECONDS = 0.25
#: Rows of servers not heard from for this long are dropped (processes gone for good).
FORGOTTEN_AFTER = dt.timedelta(days=1)

_servers = itertools.count(1)


def process_name() -> str:
    """This process, as the confirmation names it: host and pid (and which server, for a second one)."""
    number = next(_servers)
    name = f"{socket.gethostname()} pid {os.getpid()}"
    return name if number == 1 else f"{name} #{number}"


class Heartbeat:
    def __init__(self, store: Store, serial: Callable[[], int], *, process: str | None = None,
                 every: float = HEARTBEAT_SECONDS, now: Callable[[], dt.datetime] = wall_clock) -> None:
        self.store = store
        self.serial = serial
        self.process = process or process_name()
        self.every = dt.timedelta(seconds=every)
        self.now = now
        self._said: tuple[int, dt.datetime] | None = None
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    async def start(self) -> None:
        await self.beat()
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """No longer answering: no confirmation waits for this server."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        try:
            await self.store.run(self._forget)
        except Exception as exc:
            if unavailable_reason(exc) is None:
                raise
            log.warning("delegation DNS: cannot say that %s stopped answering (%s); it is forgotten in %g seconds",
                        self.process, unavailable_reason(exc), 3 * self.every.total_seconds())

    async def beat(self, *, changed_only: bool = False) -> None:
        """Say the serial answered from now (``changed_only``: only if it moved, or the last said is old)."""
        try:
            await self.store.run(self._say, changed_only)
        except Exception as exc:
            if (why := unavailable_reason(exc)) is None:
                raise
            if not self._failing:
                log.warning("delegation DNS: %s cannot say which serial it answers from (%s): orders wait for it",
                            self.process, why)
            self._failing = True
            return
        self._failing = False

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(LOOK_SECONDS)
            try:
                await self.beat(changed_only=True)
            except Exception:
                log.exception("delegation DNS: heartbeat of %s", self.process)

    def _say(self, changed_only: bool) -> None:
        serial, now = self.serial(), self.now()
        if changed_only and self._said is not None and self._said[0] == serial and now - self._said[1] < self.every:
            return
        with self.store.transaction():
            self.store.delegation_zone.answering(self.process, serial, now)
            if self._said is None:
                self.store.delegation_zone.forget_servers(now - FORGOTTEN_AFTER)
        self._said = (serial, now)

    def _forget(self) -> None:
        with self.store.transaction():
            self.store.delegation_zone.forget_server(self.process)
