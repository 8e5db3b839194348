"""The delegation zone as the built-in server answers it: a copy in memory of the SOA, the NS and
every live challenge value with its expiry, with the answer records each name's query needs
already encoded (``Zone``), so that a query reads no database and builds no message object.

The copy is loaded whole (a few values per domain being validated: a small table) and kept
current by three means, each covering what the others miss:

- A write in this process (``records.py``: publish, withdraw, the purge) loads the zone again for
  every view of this process on the same database before the write's call returns
  (``zone_written``): the value the ACME client just published is answered when it tells the CA.
- Other processes on PostgreSQL notify ``ZONE_CHANNEL`` when their write commits; the view loads
  the zone again at once.
- Every ``CHECK_SECONDS`` the view reads the zone's serial (one row) and loads the zone when it
  moved: a notice lost with a dropped connection, or a write by a path that does not notify.

A value past its expiry is not answered, whether or not the purge has removed it yet.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import threading
import weakref
from typing import TYPE_CHECKING

import attrs

from core.delegation_dns import SOA_EXPIRE, SOA_REFRESH, SOA_RETRY, TXT_TTL
from store import unavailable_reason

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Callable

    from core.clock import Clock
    from core.config import DelegationDnsConfig
    from store import Store
    from store.delegation_zone import Challenge

log = logging.getLogger("delegation_dns")

#: Notified (PostgreSQL) by every write to the zone: each process's view loads it again.
ZONE_CHANNEL = "cps_delegation_zone"
#: How often a view reads the zone's serial, in case a change was not heard of.
CHECK_SECONDS = 1.0

#: The SOA's TTL and minimum: how long a resolver may remember a name's absence (RFC 2308).
NEGATIVE_TTL = 60
NS_TTL = 3600
#: A compression pointer to the question's name, which starts right after the 12-byte header:
#: every answer record is at the name asked, in the case it was asked (DNS 0x20).
AT_QUESTION = b"\xc0\x0c"
_RR = struct.Struct("!HHIH")  # type, class, TTL, rdata length
_TXT, _SOA, _NS, _IN = 16, 6, 2, 1


def to_wire(name: str) -> bytes:
    """``name`` in wire form, lower case, uncompressed."""
    labels = [label.encode("ascii").lower() for label in name.rstrip(".").split(".") if label]
    return b"".join(bytes([len(label)]) + label for label in labels) + b"\x00"


@attrs.frozen
class Entry:
    """A challenge name's live values, and its TXT answer records already encoded."""

    values: tuple[tuple[str, float], ...]
    "Each value with its expiry (seconds since the epoch), by value."
    expires: float
    "When the first of them expires: the entry is made again then, without it."
    txt: bytes
    "The TXT records, owner the question's name, as the answer section holds them."

    @classmethod
    def of(cls, values: list[tuple[str, float]]) -> Entry:
        txt = b"".join(AT_QUESTION + _RR.pack(_TXT, _IN, TXT_TTL, len(raw) + 1) + bytes([len(raw)]) + raw
                       for raw in (value.encode() for value, _ in values))
        return cls(tuple(values), min(expires for _, expires in values), txt)

    def live(self, now: float) -> Entry | None:
        """The entry without its values expired at ``now``: None when none is left."""
        if now < self.expires:
            return self
        left = [(value, expires) for value, expires in self.values if expires > now]
        return Entry.of(left) if left else None


class Zone:
    """The zone at one serial, as answered. Entries are keyed by the label under the zone (lower
    case bytes): challenge names are one label under it, and nothing exists deeper."""

    def __init__(self, serial: int, soa_rdata: bytes, ns_records: bytes, ns_count: int,
                 entries: dict[bytes, Entry]) -> None:
        self.serial = serial
        self.soa_serial = serial & 0xFFFFFFFF
        #: The SOA record after its owner (a pointer to wherever the zone's name is in the question).
        self.soa_tail = _RR.pack(_SOA, _IN, NEGATIVE_TTL, len(soa_rdata)) + soa_rdata
        self.ns_records = ns_records
        self.ns_count = ns_count
        self.entries = entries

    def entry(self, label: bytes, now: float) -> Entry | None:
        """The label's live values at ``now``; an entry found expired is replaced in place."""
        entry = self.entries.get(label)
        if entry is None or now < entry.expires:
            return entry
        live = entry.live(now)
        if live is None:
            self.entries.pop(label, None)
        else:
            self.entries[label] = live
        return live


@attrs.frozen
class Snapshot:
    """The zone's serial and live values as read in one unit of work."""

    serial: int
    challenges: list[Challenge]


def read_zone(store: Store, now: dt.datetime) -> Snapshot:
    """A unit of work (or part of one): the zone as the store holds it."""
    return Snapshot(store.delegation_zone.serial(), store.delegation_zone.live(now))


class ZoneView:
    """The zone in memory, answered by this process's server (``Zone`` in ``zone`` once loaded)."""

    def __init__(self, config: DelegationDnsConfig, store: Store, clock: Clock, *,
                 check_seconds: float = CHECK_SECONDS) -> None:
        self.store = store
        self.clock = clock
        self.check_seconds = check_seconds
        self.zone_wire = to_wire(config.zone)
        self.zone_name = config.zone.lower().rstrip(".")
        self.nameservers = [ns.lower().rstrip(".") for ns in config.nameservers]
        mname, rname = to_wire(config.nameservers[0]), b"\x0ahostmaster" + self.zone_wire
        self._soa_names = mname + rname
        ns = [to_wire(name) for name in config.nameservers]
        self._ns_records = b"".join(AT_QUESTION + _RR.pack(_NS, _IN, NS_TTL, len(target)) + target for target in ns)
        self.zone: Zone | None = None
        "None until first loaded (the database could not be read): in-zone queries get SERVFAIL."
        self.serial = -1
        "The serial the view answers from (the store's count; -1 before the first load)."
        self._on_load: list[Callable[[int], None]] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._checking: asyncio.Task[None] | None = None
        self._reload: asyncio.Event | None = None
        self._unavailable = False

    def on_load(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(serial)`` on the server's event loop after each load of the zone."""
        self._on_load.append(callback)

    async def start(self) -> None:
        """Load the zone, then keep it current until ``stop``."""
        self._loop = asyncio.get_running_loop()
        self._reload = asyncio.Event()
        _register(self)
        self.store.on_notice(ZONE_CHANNEL, self._heard)
        await self._load()
        self._checking = asyncio.ensure_future(self._keep_current())

    async def stop(self) -> None:
        _unregister(self)
        if self._checking is not None:
            self._checking.cancel()
            await asyncio.gather(self._checking, return_exceptions=True)

    def _heard(self, _payload: str | None) -> None:
        """On the listener's thread: another process changed the zone (or notices were missed)."""
        loop, reload = self._loop, self._reload
        if loop is not None and reload is not None and not loop.is_closed():
            loop.call_soon_threadsafe(reload.set)

    async def _keep_current(self) -> None:
        assert self._reload is not None
        while True:
            try:
                async with asyncio.timeout(self.check_seconds):
                    await self._reload.wait()
                force = False
            except TimeoutError:
                if self.zone is not None and not await self._moved():
                    continue
                force = True  # the store's serial is not the view's, even lower (a write rolled back)
            self._reload.clear()
            await self._load(force=force)

    async def _moved(self) -> bool:
        try:
            return await self.store.run(self.store.delegation_zone.serial) != self.serial
        except Exception as exc:  # noqa: BLE001 - it answers from what it has; a bug is logged
            self._cannot_read(exc)
            return False

    async def _load(self, *, force: bool = False) -> None:
        try:
            snapshot = await self.store.run(read_zone, self.store, self.clock.now())
        except Exception as exc:  # noqa: BLE001 - it answers from what it has; a bug is logged
            self._cannot_read(exc)
            return
        self.replace(snapshot, force=force)

    def _cannot_read(self, exc: Exception) -> None:
        if (why := unavailable_reason(exc)) is None:
            log.exception("delegation DNS: cannot load the zone")
        elif not self._unavailable:
            log.warning("delegation DNS: cannot read the zone, answering from serial %s: %s", self.serial, why)
        self._unavailable = True

    def replace(self, snapshot: Snapshot, *, force: bool = False) -> None:
        """Answer from ``snapshot`` from now on, unless the view already has a later serial and
        not ``force`` (from any thread: the writer's, after its write, while a load of the view's
        own, begun before the write committed, may end after it)."""
        zone = self.compile(snapshot)
        with self._lock:
            if self.zone is not None and snapshot.serial < self.serial and not force:
                return
            self.zone, self.serial = zone, snapshot.serial
        self._unavailable = False
        loop = self._loop
        if not self._on_load or loop is None or loop.is_closed():
            return
        for callback in self._on_load:
            loop.call_soon_threadsafe(callback, snapshot.serial)

    def compile(self, snapshot: Snapshot) -> Zone:
        by_label: dict[bytes, list[tuple[str, float]]] = {}
        suffix = "." + self.zone_name
        for challenge in snapshot.challenges:
            name = challenge.name.lower()
            if not name.endswith(suffix):
                continue
            label = name[: -len(suffix)]
            if "." in label or not label:
                continue
            by_label.setdefault(label.encode(), []).append((challenge.value, challenge.expires_at.timestamp()))
        soa_rdata = self._soa_names + struct.pack("!IIIII", snapshot.serial & 0xFFFFFFFF, SOA_REFRESH, SOA_RETRY, SOA_EXPIRE,
                                                  NEGATIVE_TTL)
        return Zone(snapshot.serial, soa_rdata, self._ns_records, len(self.nameservers),
                    {label: Entry.of(sorted(values)) for label, values in by_label.items()})

    def values(self, label: bytes, now: float) -> list[str]:
        """The values live at ``<label>.<zone>`` (lower-case label) at ``now``."""
        zone = self.zone
        entry = zone.entry(label, now) if zone is not None else None
        return [value for value, _ in entry.values] if entry is not None else []


# -- the views of this process, by database ---------------------------------------------------------

_VIEWS: dict[str, weakref.WeakSet[ZoneView]] = {}
_VIEWS_LOCK = threading.Lock()


def _database(store: Store) -> str:
    """Which database ``store`` is on: two Stores of one process on it share their views."""
    if store.url:
        return store.url
    if store.path in ("", ":memory:"):
        return f"memory:{id(store)}"
    return os.path.realpath(store.path)


def _register(view: ZoneView) -> None:
    with _VIEWS_LOCK:
        _VIEWS.setdefault(_database(view.store), weakref.WeakSet()).add(view)


def _unregister(view: ZoneView) -> None:
    with _VIEWS_LOCK:
        views = _VIEWS.get(_database(view.store))
        if views is not None:
            views.discard(view)


def zone_written(store: Store, now: dt.datetime) -> None:
    """After a write to the zone committed (inside the writer's unit of work): every view of this
    process on the same database answers from the zone as it is now, before the write returns;
    and the other processes are told (the notice was sent with the commit, ``notify_zone``)."""
    with _VIEWS_LOCK:
        views = list(_VIEWS.get(_database(store), ()))
    if not views:
        return
    snapshot = read_zone(store, now)
    for view in views:
        view.replace(snapshot)


def notify_zone(store: Store) -> None:
    """Inside the writing transaction: the other processes on PostgreSQL load the zone once it commits."""
    store.notify(ZONE_CHANNEL)

