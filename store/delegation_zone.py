"""The delegation zone's contents as the built-in server answers them (migration 23): the DNS-01
TXT values live at each challenge name, the zone's serial that each change moves, the journal of
changes that IXFR sends, and each process's server with the serial it answers from.

A value added where it already is changes nothing but its expiry: the serial moves only when what
the zone answers changes."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import attrs

from store._rows import from_ts, select, ts

if TYPE_CHECKING:
    from store.sqlite.connection import Database


@attrs.frozen
class Challenge:
    """One TXT value live at ``name``."""

    name: str
    value: str
    expires_at: dt.datetime
    order_url: str | None
    "The ACME order the value answers (None: published before migration 23, or not for an order)."
    published_at: dt.datetime | None


@attrs.frozen
class Change:
    """A value added to or removed from the zone by the change that made ``serial``."""

    serial: int
    name: str
    value: str
    added: bool


class DelegationZoneRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def serial(self) -> int:
        """The zone's serial as a count (served modulo 2**32)."""
        return int(self.db.execute("SELECT serial FROM delegation_zone WHERE id = 1").fetchone()[0])

    def publish(self, name: str, value: str, expires_at: dt.datetime, now: dt.datetime, *,
                order_url: str | None = None) -> int | None:
        """Add ``value`` at ``name`` until ``expires_at``: the new serial, or None when the value was
        there already (its expiry and order are updated; the zone is unchanged)."""
        name = name.lower()
        known = self.db.execute("SELECT 1 FROM acme_challenges WHERE name = ? AND value = ?", [name, value]).fetchone()
        if known:
            self.db.execute("UPDATE acme_challenges SET expires_at = ?, order_url = coalesce(?, order_url) "
                            "WHERE name = ? AND value = ?", [ts(expires_at), order_url, name, value])
            return None
        self.db.execute("INSERT INTO acme_challenges (name, value, expires_at, order_url, published_at) "
                        "VALUES (?, ?, ?, ?, ?)", [name, value, ts(expires_at), order_url, ts(now)])
        return self._changed([(name, value)], now, added=True)

    def withdraw(self, name: str, value: str, now: dt.datetime) -> int | None:
        """Remove ``value`` from ``name``: the new serial, or None when it was not there."""
        name = name.lower()
        gone = self.db.execute("DELETE FROM acme_challenges WHERE name = ? AND value = ?", [name, value]).rowcount
        return self._changed([(name, value)], now, added=False) if gone else None

    def purge(self, now: dt.datetime) -> int:
        """Remove the values past their expiry, in one change (one serial): how many went."""
        gone = [(r["name"], r["value"]) for r in select(
            self.db, "SELECT name, value FROM acme_challenges WHERE expires_at <= ?", [ts(now)])]
        if not gone:
            return 0
        for name, value in gone:
            self.db.execute("DELETE FROM acme_challenges WHERE name = ? AND value = ?", [name, value])
        self._changed(gone, now, added=False)
        return len(gone)

    def _changed(self, values: list[tuple[str, str]], now: dt.datetime, *, added: bool) -> int:
        serial = int(self.db.execute("UPDATE delegation_zone SET serial = serial + 1 WHERE id = 1 "
                                     "RETURNING serial").fetchone()[0])
        for name, value in values:
            self.db.execute("INSERT INTO delegation_zone_changes (serial, name, value, added, changed_at) "
                            "VALUES (?, ?, ?, ?, ?)", [serial, name, value, int(added), ts(now)])
        return serial

    def contents(self) -> tuple[int, list[tuple[str, str]]]:
        """The serial and every value the zone holds at it, by name and value, expired or not: a value
        leaves the zone (and its secondaries, by IXFR) by a change, ``purge``, never by the clock alone.
        Read again while a change commits in between, so that the two agree on every backend."""
        while True:
            serial = self.serial()
            rows = self.db.execute("SELECT name, value FROM acme_challenges ORDER BY name, value").fetchall()
            if self.serial() == serial:
                return serial, [(name, value) for name, value in rows]
    def over(self, now: dt.datetime) -> list[Challenge]:
        """Withdraw the values whose order is over (no certificate has it under way any more), in one
        change: those withdrawn. A value of no known order (published before migration 23) waits
        for its expiry."""
        gone = [_challenge(r) for r in select(self.db, """
            SELECT * FROM acme_challenges c WHERE c.order_url IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM acme_certificates a WHERE a.order_url = c.order_url)
            ORDER BY c.name, c.value""")]
        if not gone:
            return []
        for challenge in gone:
            self.db.execute("DELETE FROM acme_challenges WHERE name = ? AND value = ?", [challenge.name, challenge.value])
        self._changed([(c.name, c.value) for c in gone], now, added=False)
        return gone

    def at(self, name: str, now: dt.datetime) -> list[Challenge]:
        """The values live at ``name``, oldest first."""
        return [_challenge(r) for r in select(
            self.db, "SELECT * FROM acme_challenges WHERE name = ? AND expires_at > ? ORDER BY published_at, value",
            [name.lower(), ts(now)])]

    def added_in(self, name: str, value: str) -> int | None:
        """The serial of the change that added ``value`` at ``name`` last, while the journal keeps it."""
        row = self.db.execute("SELECT max(serial) FROM delegation_zone_changes WHERE name = ? AND value = ? "
                              "AND added = 1", [name.lower(), value]).fetchone()
        return None if row[0] is None else int(row[0])

    def live(self, now: dt.datetime) -> list[Challenge]:
        """Every value live in the zone, by name and value."""
        return [_challenge(r) for r in select(
            self.db, "SELECT * FROM acme_challenges WHERE expires_at > ? ORDER BY name, value", [ts(now)])]

    def values(self, name: str, now: dt.datetime) -> list[str]:
        """The TXT values live at ``name``."""
        rows = self.db.execute("SELECT value FROM acme_challenges WHERE name = ? AND expires_at > ? ORDER BY value",
                               [name.lower(), ts(now)]).fetchall()
        return [value for (value,) in rows]

    def changes_since(self, serial: int) -> list[Change] | None:
        """The changes after ``serial``, in order; None when the journal no longer reaches back to it
        (or ``serial`` is not one the zone had): a secondary then needs the whole zone."""
        current, journal_from = self.db.execute("SELECT serial, journal_from FROM delegation_zone WHERE id = 1").fetchone()
        if not int(journal_from) <= serial <= int(current):
            return None
        return [Change(int(r["serial"]), r["name"], r["value"], bool(r["added"])) for r in select(
            self.db, "SELECT * FROM delegation_zone_changes WHERE serial > ? ORDER BY serial, added, name, value",
            [serial])]

    def forget_changes(self, before: dt.datetime) -> None:
        """Drop the journal's changes made before ``before``: IXFR from an older serial sends the whole zone."""
        row = self.db.execute("SELECT max(serial) FROM delegation_zone_changes WHERE changed_at < ?", [ts(before)]).fetchone()
        if row[0] is None:
            return
        self.db.execute("DELETE FROM delegation_zone_changes WHERE serial <= ?", [int(row[0])])
        self.db.execute("UPDATE delegation_zone SET journal_from = ? WHERE id = 1 AND journal_from < ?",
                        [int(row[0]), int(row[0])])

    # -- the servers answering for the zone, one per process --------------------------------------

    def answering(self, process: str, serial: int, now: dt.datetime) -> None:
        """``process``'s server answers from ``serial`` since ``now`` or before."""
        self.db.execute("""INSERT INTO delegation_zone_servers (process, serial, seen_at) VALUES (?, ?, ?)
                           ON CONFLICT (process) DO UPDATE SET serial = excluded.serial, seen_at = excluded.seen_at""",
                        [process, serial, ts(now)])

    def servers(self, seen_since: dt.datetime) -> dict[str, int]:
        """The serial each process's server answers from, of those heard from since ``seen_since``."""
        return {r["process"]: int(r["serial"]) for r in select(
            self.db, "SELECT process, serial FROM delegation_zone_servers WHERE seen_at >= ?", [ts(seen_since)])}

    def forget_server(self, process: str) -> None:
        """``process`` stopped: it no longer answers, and no confirmation waits for it."""
        self.db.execute("DELETE FROM delegation_zone_servers WHERE process = ?", [process])

    def forget_servers(self, seen_before: dt.datetime) -> None:
        self.db.execute("DELETE FROM delegation_zone_servers WHERE seen_at < ?", [ts(seen_before)])


def _challenge(r: dict[str, Any]) -> Challenge:
    return Challenge(name=r["name"], value=r["value"], expires_at=from_ts(r["expires_at"]), order_url=r["order_url"],
                     published_at=from_ts(r["published_at"]))
