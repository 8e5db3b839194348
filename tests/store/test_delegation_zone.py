"""The delegation zone's contents (store/delegation_zone.py), on both backends: every change moves
the serial and is journaled under it, so that servers reload only on a change and a secondary is
sent what changed since its serial (IXFR), or the whole zone once the journal no longer reaches back."""

from __future__ import annotations

import datetime as dt

from store import Store
from store.delegation_zone import Change
from tests.store.conftest import OpenStore

NOW = dt.datetime(2026, 11, 28, 12, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(hours=1)
NAME = "k1.acme.saas.example"


def publish(store: Store, value: str, *, name: str = NAME, expires_at: dt.datetime = LATER,
            order_url: str | None = None) -> int | None:
    with store.transaction():
        return store.delegation_zone.publish(name, value, expires_at, NOW, order_url=order_url)


def withdraw(store: Store, value: str) -> int | None:
    with store.transaction():
        return store.delegation_zone.withdraw(NAME, value, NOW)


def test_each_change_moves_the_serial_by_one(store: Store) -> None:
    first = store.delegation_zone.serial()
    assert publish(store, "a") == first + 1
    assert withdraw(store, "a") == first + 2
    assert store.delegation_zone.serial() == first + 2


def test_the_serial_starts_above_the_time_based_serials_served_before(store: Store) -> None:
    assert store.delegation_zone.serial() >= 1_700_000_000


def test_publishing_a_value_already_there_leaves_the_zone_unchanged(store: Store) -> None:
    publish(store, "a")
    serial = store.delegation_zone.serial()
    assert publish(store, "a", expires_at=LATER + dt.timedelta(hours=1), order_url="https://ca/order/1") is None
    assert store.delegation_zone.serial() == serial
    (live,) = store.delegation_zone.live(NOW)
    assert (live.expires_at, live.order_url) == (LATER + dt.timedelta(hours=1), "https://ca/order/1")


def test_withdrawing_a_value_not_there_leaves_the_zone_unchanged(store: Store) -> None:
    serial = store.delegation_zone.serial()
    assert withdraw(store, "a") is None
    assert store.delegation_zone.serial() == serial


def test_expired_values_are_not_live_and_are_purged_in_one_change(store: Store) -> None:
    publish(store, "a", expires_at=NOW + dt.timedelta(seconds=1))
    publish(store, "b", expires_at=NOW + dt.timedelta(seconds=1))
    publish(store, "c")
    serial = store.delegation_zone.serial()
    after = NOW + dt.timedelta(seconds=2)
    assert store.delegation_zone.values(NAME, after) == ["c"]
    with store.transaction():
        assert store.delegation_zone.purge(after) == 2
    assert store.delegation_zone.serial() == serial + 1
    assert store.delegation_zone.changes_since(serial) == [Change(serial + 1, NAME, "a", False),
                                                           Change(serial + 1, NAME, "b", False)]


def test_the_journal_says_what_changed_since_a_serial(store: Store) -> None:
    start = store.delegation_zone.serial()
    publish(store, "a")
    publish(store, "b")
    withdraw(store, "a")
    assert store.delegation_zone.changes_since(start + 1) == [Change(start + 2, NAME, "b", True),
                                                              Change(start + 3, NAME, "a", False)]
    assert store.delegation_zone.changes_since(start + 3) == []


def test_a_serial_the_journal_no_longer_reaches_asks_for_the_whole_zone(store: Store) -> None:
    start = store.delegation_zone.serial()
    publish(store, "a")
    publish(store, "b")
    with store.transaction():
        store.delegation_zone.forget_changes(NOW + dt.timedelta(seconds=1))
    assert store.delegation_zone.changes_since(start) is None
    assert store.delegation_zone.changes_since(start + 2) == []
    assert store.delegation_zone.changes_since(start + 3) is None  # a serial the zone never had


def test_every_process_on_the_database_sees_a_change(open_store: OpenStore) -> None:
    writer, reader = open_store(), open_store()
    serial = publish(writer, "a")
    assert reader.delegation_zone.serial() == serial
    assert reader.delegation_zone.values(NAME, NOW) == ["a"]


def test_the_servers_heard_from_recently_are_the_ones_answering(store: Store) -> None:
    with store.transaction():
        store.delegation_zone.answering("p1", 7, NOW)
        store.delegation_zone.answering("p2", 5, NOW - dt.timedelta(minutes=5))
        store.delegation_zone.answering("p1", 8, NOW)
    assert store.delegation_zone.servers(NOW - dt.timedelta(seconds=30)) == {"p1": 8}
    with store.transaction():
        store.delegation_zone.forget_server("p1")
        store.delegation_zone.forget_servers(NOW - dt.timedelta(seconds=30))
    assert store.delegation_zone.servers(NOW - dt.timedelta(days=1)) == {}
