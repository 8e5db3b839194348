"""Challenge values kept in the store, which the built-in server answers from, and the choice
between that and RFC 2136 (``[delegation_dns] mode``), with what check-config says of each."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from core.delegation_dns import (
    CHALLENGE_LIFETIME,
    JOURNAL_KEPT,
    ChallengeRecords,
    ChallengeRecordsError,
    challenge_name,
    challenge_value,
)
from core.delegation_dns.rfc2136 import DynamicUpdate
from core.delegation_dns.sockets import bind
from core.delegation_dns.view import notify_zone, zone_written
from store import unavailable_reason

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.clock import Clock
    from core.config import Config
    from store import Store


class StoredRecords:
    """``mode = "builtin"``: a row per value, live for ``CHALLENGE_LIFETIME`` unless withdrawn.
    Each write is answered by this process's server before it returns, and by the others' within
    a second (view.py)."""

    def __init__(self, zone: str, store: Store, clock: Clock) -> None:
        self.zone = zone
        self.store = store
        self.clock = clock

    async def publish(self, name: str, value: str) -> None:
        name, value = challenge_name(name, self.zone), challenge_value(value)
        expires_at = self.clock.now() + CHALLENGE_LIFETIME

        def add() -> None:
            with self.store.transaction():
                self.store.delegation_zone.publish(name, value, expires_at, self.clock.now())
                notify_zone(self.store)
            zone_written(self.store, self.clock.now())

        await self._write(add, f"publish the challenge record at {name}")

    async def withdraw(self, name: str, value: str) -> None:
        name = challenge_name(name, self.zone)

        def remove() -> None:
            with self.store.transaction():
                if self.store.delegation_zone.withdraw(name, value, self.clock.now()) is not None:
                    notify_zone(self.store)
            zone_written(self.store, self.clock.now())

        await self._write(remove, f"withdraw the challenge record at {name}")

    async def _write(self, unit: Callable[[], None], what: str) -> None:
        try:
            await self.store.run(unit)
        except Exception as exc:
            if (why := unavailable_reason(exc)) is None:
                raise
            raise ChallengeRecordsError(f"Cannot {what}: {why}.") from exc


def make_challenge_records(config: Config, store: Store, clock: Clock) -> ChallengeRecords:
    """The store for the built-in server, or the operator's nameserver by dynamic update."""
    delegation = config.delegation_dns
    if delegation.mode == "rfc2136":
        return DynamicUpdate(delegation)
    return StoredRecords(delegation.zone, store, clock)


def purge_expired(store: Store, clock: Clock) -> int:
    """Withdraw the values nobody withdrew, and forget the journal's changes of more than a day
    ago (a unit of work: the periodic purge runs it): how many values went."""
    now = clock.now()
    with store.transaction():
        gone = store.delegation_zone.purge(now)
        store.delegation_zone.forget_changes(now - JOURNAL_KEPT)
        if gone:
            notify_zone(store)
    if gone:
        zone_written(store, now)
    return gone


def check_lines(config: Config) -> list[str]:
    """check-config's lines (``kind = "acme"``): the listen address can be bound (and is then let
    go at once), or the operator's nameserver answers the zone's SOA to a query signed with the
    key. Raises ``ConfigError`` or ``ChallengeRecordsError`` saying why not."""
    if config.provider.kind != "acme":
        return []
    delegation = config.delegation_dns
    if delegation.mode == "rfc2136":
        said = asyncio.run(DynamicUpdate(delegation).check())
        return [f"  delegation zone {delegation.zone}: challenge records sent by RFC 2136 update; {said}"]
    for sock in bind(delegation.listen):
        sock.close()
    listening = f"answered by the service on {delegation.listen} (UDP and TCP, can be bound)"
    return [f"  delegation zone {delegation.zone}: {listening} as {', '.join(delegation.nameservers)}"]
