"""Placeholder until the delegation DNS package lands (branch i39-dns): the builtin records only."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from core.clock import Clock
    from core.config import Config
    from store import Store


class ChallengeRecords(Protocol):
    async def publish(self, name: str, value: str) -> None: ...

    async def withdraw(self, name: str, value: str) -> None: ...


class _Builtin:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store, self.clock = store, clock

    async def publish(self, name: str, value: str) -> None:
        def unit() -> None:
            with self.store.transaction():
                self.store.acme.add_challenge(name, value, self.clock.now() + dt.timedelta(hours=1))
        await self.store.run(unit)

    async def withdraw(self, name: str, value: str) -> None:
        def unit() -> None:
            with self.store.transaction():
                self.store.acme.remove_challenge(name, value)
        await self.store.run(unit)


def make_challenge_records(config: Config, store: Store, clock: Clock) -> ChallengeRecords:
    return _Builtin(store, clock)
