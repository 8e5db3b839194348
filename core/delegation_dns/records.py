"""Challenge values kept in the store, which the built-in server answers from, and the choice
between that and RFC 2136 (``[delegation_dns] mode``), with what check-config says of each.

A value lives until its authorization is settled (core/acme/orders.py withdraws it), or its order
is over (``withdraw_finished``, at start-up and with the periodic purge: the values of a process
that stopped halfway), or ``CHALLENGE_LIFETIME`` passes (``purge_expired``)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, TypeVar

from core.delegation_dns import (
    CHALLENGE_LIFETIME,
    JOURNAL_KEPT,
    MAX_VALUES_AT_A_NAME,
    ChallengeRecords,
    ChallengeRecordsError,
    challenge_name,
    challenge_value,
)
from core.delegation_dns.confirm import (
    GONE_AFTER,
    behind,
    local_address,
    not_answering,
    until_confirmed,
    wall_clock,
)
from core.delegation_dns.notify import Notifier
from core.delegation_dns.rfc2136 import DynamicUpdate
from core.delegation_dns.sockets import bind
from core.delegation_dns.view import notify_zone, zone_written
from store import unavailable_reason

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.clock import Clock
    from core.config import Config
    from core.metrics import Metrics
    from store import Store
    from store.delegation_zone import Challenge

log = logging.getLogger("delegation_dns")
T = TypeVar("T")


class StoredRecords:
    """``mode = "builtin"``: a row per value, live for ``CHALLENGE_LIFETIME`` unless withdrawn; each
    change told to the secondaries (``notifier``, when there are) once committed. Each write is
    answered by this process's server before it returns, and by the others' within a second (view.py)."""

    def __init__(self, zone: str, store: Store, clock: Clock, *, listen: str = "",
                 secondaries: list[str] | None = None, notifier: Notifier | None = None) -> None:
        self.zone = zone
        self.store = store
        self.clock = clock
        self.listen = listen
        "Where the built-in server answers (asked once by ``confirm``); empty: not asked."
        self.secondaries = secondaries or []
        "The secondaries the built-in server is the hidden primary of: ``confirm`` asks them."
        self.notifier = notifier

    async def publish(self, name: str, value: str, *, order_url: str | None = None) -> None:
        name, value = challenge_name(name, self.zone), challenge_value(value)
        expires_at = self.clock.now() + CHALLENGE_LIFETIME

        def add() -> tuple[int | None, list[Challenge]]:
            with self.store.transaction():
                now = self.clock.now()
                serial = self.store.delegation_zone.publish(name, value, expires_at, now, order_url=order_url)
                if serial is not None:
                    notify_zone(self.store)
                live = self.store.delegation_zone.at(name, now)
            zone_written(self.store, now)
            return serial, live

        serial, live = await self._write(add, f"publish the challenge record at {name}")
        self.changed(serial)
        if len(live) > MAX_VALUES_AT_A_NAME:
            log.warning("delegation DNS: %d values are live at %s (at most %d expected), a long answer that a CA's "
                        "resolver may fail to read; left by %s. Values of orders that are over are withdrawn at the "
                        "next purge; the others expire %s after they were published", len(live), name,
                        MAX_VALUES_AT_A_NAME, _causes(live), CHALLENGE_LIFETIME)

    async def withdraw(self, name: str, value: str) -> None:
        name = challenge_name(name, self.zone)

        def remove() -> int | None:
            with self.store.transaction():
                serial = self.store.delegation_zone.withdraw(name, value, self.clock.now())
                if serial is not None:
                    notify_zone(self.store)
            zone_written(self.store, self.clock.now())
            return serial

        self.changed(await self._write(remove, f"withdraw the challenge record at {name}"))

    def changed(self, serial: int | None) -> None:
        """The zone moved to ``serial`` (None: it did not): the secondaries are told."""
        if serial is not None and self.notifier is not None:
            self.notifier.changed(serial)

    async def confirm(self, name: str, value: str, *, within: float) -> list[str]:
        """Hidden primary: each secondary asked for the value. Else each process's server answers from
        the serial that added the value, or a later one (the current serial, when the journal no
        longer says), and the listen address answers it (asked until it does once)."""
        name = challenge_name(name, self.zone)
        if self.secondaries:
            return await until_confirmed(lambda: not_answering(self.secondaries, name, value), within)
        needed = await self.store.run(self._added_in, name, value)
        asked = not self.listen

        async def check() -> list[str]:
            nonlocal asked
            servers = await self.store.run(self.store.delegation_zone.servers, wall_clock() - GONE_AFTER)
            missing = behind(servers, needed)
            if not missing and not asked:
                missing = await not_answering([local_address(self.listen)], name, value,
                                              what="the built-in server listening on")
                asked = not missing
            return missing

        return await until_confirmed(check, within)

    def _added_in(self, name: str, value: str) -> int:
        zone = self.store.delegation_zone
        return zone.added_in(name, value) or zone.serial()

    async def _write(self, unit: Callable[[], T], what: str) -> T:
        try:
            return await self.store.run(unit)
        except Exception as exc:
            if (why := unavailable_reason(exc)) is None:
                raise
            raise ChallengeRecordsError(f"Cannot {what}: {why}.") from exc


def make_challenge_records(config: Config, store: Store, clock: Clock, metrics: Metrics | None = None) -> ChallengeRecords:
    """The store for the built-in server (NOTIFY to its secondaries, if any), or the operator's
    nameserver by dynamic update."""
    delegation = config.delegation_dns
    if delegation.mode == "rfc2136":
        return DynamicUpdate(delegation)
    notifier = Notifier(delegation, metrics) if delegation.secondaries else None
    return StoredRecords(delegation.zone, store, clock, listen=delegation.listen, secondaries=delegation.secondaries,
                         notifier=notifier)


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
    return gone + len(withdraw_finished(store, clock))


def withdraw_finished(store: Store, clock: Clock) -> list[Challenge]:
    """Withdraw the values whose order is over (a unit of work, at start-up and with the periodic
    purge): a process that stopped halfway through an order leaves its value, which its order, once
    ended by another process or abandoned, no longer needs."""
    with store.transaction():
        gone = store.delegation_zone.over(clock.now())
        if gone:
            notify_zone(store)
    if gone:
        zone_written(store, clock.now())
        log.info("delegation DNS: withdrew %d value%s of orders that are over: %s", len(gone),
                 "s" if len(gone) != 1 else "", _causes(gone))
    return gone


def _causes(values: list[Challenge]) -> str:
    """Which orders left ``values``, and when."""
    return "; ".join(f"{c.name} for the order {c.order_url or '(unknown: published before it was noted)'}"
                     + (f" published {c.published_at:%Y-%m-%d %H:%M:%S} UTC" if c.published_at else "")
                     for c in values)


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
        listening += (f", hidden primary of {', '.join(delegation.secondaries)} (transfers and NOTIFY signed with "
                      f"{delegation.tsig_key_name})")
    return [f"  delegation zone {delegation.zone}: {listening} as {', '.join(delegation.nameservers)}"]
