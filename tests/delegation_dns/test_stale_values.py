"""Issue 47, item 6: no stale challenge values. A process that stopped halfway leaves its values;
once their order is over they are withdrawn when the service starts (and with the periodic purge),
not an hour later; more than a few values at one name is said in the log, with the orders that
left them. (A settled authorization's value: tests/acme/test_confirmed_everywhere.py.)"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time

from core.delegation_dns import MAX_VALUES_AT_A_NAME
from core.delegation_dns.records import StoredRecords
from store import Store
from store.acme import AcmeCertificate
from tests.delegation_dns.conftest import ZONE
from tests.delegation_dns.test_wiring import acme_service
from tests.patience import PATIENCE_SECONDS
from tests.servers.service import free_port

TOKEN = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"
OVER, UNDER_WAY = "https://ca.test/order/over", "https://ca.test/order/under-way"


def test_more_values_at_a_name_than_expected_is_a_warning_naming_the_orders(open_store, clock, caplog):
    records = StoredRecords(ZONE, open_store(), clock)
    name = f"piled.{ZONE}"
    for n in range(MAX_VALUES_AT_A_NAME + 1):
        asyncio.run(records.publish(name, f"value-{n}", order_url=f"https://ca.test/order/{n}"))
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"{MAX_VALUES_AT_A_NAME + 1} values are live at {name}" in warning
    assert all(f"https://ca.test/order/{n}" in warning for n in range(MAX_VALUES_AT_A_NAME + 1))


def test_as_many_values_as_expected_are_no_warning(open_store, clock, caplog):
    records = StoredRecords(ZONE, open_store(), clock)
    for n in range(MAX_VALUES_AT_A_NAME):
        asyncio.run(records.publish(f"full.{ZONE}", f"value-{n}", order_url=f"https://ca.test/order/{n}"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def left_by_a_crashed_process(database) -> None:
    """The values a process published before it was killed: one of an order since over (no
    certificate has it under way), one of an order still under way."""
    store = Store(database)
    now = dt.datetime.now(dt.UTC)
    try:
        with store.transaction():
            store.delegation_zone.publish(f"over.{ZONE}", TOKEN, now + dt.timedelta(hours=1), now, order_url=OVER)
            store.delegation_zone.publish(f"under-way.{ZONE}", TOKEN, now + dt.timedelta(hours=1), now,
                                          order_url=UNDER_WAY)
            store.acme.put(AcmeCertificate(handle="c1", apex="shop.example.com", directory_url="https://ca.test/dir",
                                           status="pending", created_at=now, updated_at=now, order_url=UNDER_WAY))
    finally:
        store.close()


def live(database, name: str) -> list[str]:
    store = Store(database)
    try:
        return store.delegation_zone.values(name, dt.datetime.now(dt.UTC))
    finally:
        store.close()


def test_a_crashed_process_values_of_an_order_that_is_over_are_withdrawn_at_start_up(tmp_path):
    service = acme_service(tmp_path, free_port()).start()
    service.kill()
    left_by_a_crashed_process(service.database)
    service.start()
    try:
        deadline = time.monotonic() + PATIENCE_SECONDS
        while live(service.database, f"over.{ZONE}"):
            assert time.monotonic() < deadline, "the value of the order that is over is still answered"
            time.sleep(0.1)
        assert live(service.database, f"under-way.{ZONE}") == [TOKEN]
    finally:
        service.stop()
