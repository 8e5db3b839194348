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
from core.delegation_dns.notify import Notifier
from core.delegation_dns.rfc2136 import DynamicUpdate
from core.delegation_dns.sockets import bind
from store import unavailable_reason

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.clock import Clock
    from core.config import Config
    from core.metrics import Metrics
    from store import Store


class StoredRecords:
    """``mode = "builtin"``: a row per value, live for ``CHALLENGE_LIFETIME`` unless withdrawn; each
    change told to the secondaries (``notifier``, when there are: issue 47 item 4) once committed."""

    def __init__(self, zone: str, store: Store, clock: Clock, notifier: Notifier | None = None) -> None:
        self.zone = zone
        self.store = store
        self.clock = clock
        self.notifier = notifier

    async def publish(self, name: str, value: str) -> None:
        name, value = challenge_name(name, self.zone), challenge_value(value)
        expires_at = self.clock.now() + CHALLENGE_LIFETIME

        def add() -> int | None:
            with self.store.transaction():
                return self.store.delegation_zone.publish(name, value, expires_at, self.clock.now())

        await self._write(add, f"publish the challenge record at {name}")

    async def withdraw(self, name: str, value: str) -> None:
        name = challenge_name(name, self.zone)

        def remove() -> int | None:
            with self.store.transaction():
                return self.store.delegation_zone.withdraw(name, value, self.clock.now())

        await self._write(remove, f"withdraw the challenge record at {name}")

    async def _write(self, unit: Callable[[], int | None], what: str) -> None:
        try:
            serial = await self.store.run(unit)
        except Exception as exc:
            if (why := unavailable_reason(exc)) is None:
                raise
            raise ChallengeRecordsError(f"Cannot {what}: {why}.") from exc
        if serial is not None and self.notifier is not None:
            self.notifier.changed(serial)


def make_challenge_records(config: Config, store: Store, clock: Clock, metrics: Metrics | None = None) -> ChallengeRecords:
    """The store for the built-in server (NOTIFY to its secondaries, if any), or the operator's
    nameserver by dynamic update."""
    delegation = config.delegation_dns
    if delegation.mode == "rfc2136":
        return DynamicUpdate(delegation)
    return StoredRecords(delegation.zone, store, clock, Notifier(delegation, metrics) if delegation.secondaries else None)


def purge_expired(store: Store, clock: Clock) -> int:
    """Withdraw the values nobody withdrew, and forget the journal's changes of more than a day
    ago (a unit of work: the periodic purge runs it): how many values went."""
    now = clock.now()
    with store.transaction():
        gone = store.delegation_zone.purge(now)
        store.delegation_zone.forget_changes(now - JOURNAL_KEPT)
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
    if delegation.secondaries:
        listening += f", hidden primary of {', '.join(delegation.secondaries)} (transfers and NOTIFY signed with {delegation.tsig_key_name})"
    return [f"  delegation zone {delegation.zone}: {listening} as {', '.join(delegation.nameservers)}"]
