"""The zone the built-in server answers from, in memory (core/delegation_dns/view.py): loaded from
the store, current at once after a write in this process, within a second of another process's
(PostgreSQL's notices, and a check of the serial for what no notice tells), and never read from
the database for a query."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

import dns.rcode
import pytest

from tests.delegation_dns.conftest import ZONE
from tests.delegation_dns.test_server import NAME, TOKEN, values
from tests.patience import PATIENCE_SECONDS

protocol_only = pytest.mark.parametrize("store_backend", ["sqlite"])
postgres_only = pytest.mark.parametrize("store_backend", ["postgresql"])
#: A check of the serial so rare that it cannot be what made a test pass.
NEVER = 3600.0
ROOT = Path(__file__).resolve().parents[2]


def until(condition, what: str) -> None:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < PATIENCE_SECONDS, f"not within {PATIENCE_SECONDS} s: {what}"
        time.sleep(0.02)


def answered(server, value: str) -> bool:
    answer = server.udp(NAME)
    return answer.rcode() == dns.rcode.NOERROR and values(answer) == [value]


@protocol_only
def test_a_query_for_a_name_without_values_reads_no_database(serve):
    """A flood of random names costs no database read (each was one before)."""
    server = serve(check_seconds=NEVER)
    statements: list[str] = []
    server.store.db.conn.set_trace_callback(statements.append)
    try:
        answer = server.udp(f"random-{TOKEN[:8].lower()}.{ZONE}")
    finally:
        server.store.db.conn.set_trace_callback(None)
    assert answer.rcode() == dns.rcode.NXDOMAIN
    assert statements == []


def test_a_value_published_in_this_process_is_answered_as_the_publish_returns(serve, zone):
    server = serve(check_seconds=NEVER)
    zone.publish(NAME, TOKEN)
    assert values(server.udp(NAME)) == [TOKEN]


def test_a_value_withdrawn_in_this_process_is_gone_as_the_withdrawal_returns(serve, zone):
    server = serve(check_seconds=NEVER)
    zone.publish(NAME, TOKEN)
    zone.withdraw(NAME, TOKEN)
    assert server.udp(NAME).rcode() == dns.rcode.NXDOMAIN


@postgres_only
def test_a_value_published_by_another_process_on_postgresql_is_answered_once_notified(serve, pg_database):
    """Another process's write reaches this one by NOTIFY: the serial is checked too rarely here
    to be what brings it."""
    server = serve(check_seconds=NEVER)
    publish = ("import asyncio, sys\n"
               "from core.delegation_dns.records import StoredRecords\n"
               "from store import Store\n"
               "from tests.fakes import FakeClock\n"
               "store = Store(url=sys.argv[1])\n"
               f"asyncio.run(StoredRecords({ZONE!r}, store, FakeClock()).publish({NAME!r}, {TOKEN!r}))\n"
               "store.close()\n")
    subprocess.run([sys.executable, "-c", publish, pg_database], cwd=ROOT, check=True, timeout=PATIENCE_SECONDS)
    until(lambda: answered(server, TOKEN), "the other process's value answered")


def test_a_change_no_notice_told_of_is_answered_after_the_serial_is_checked(serve, open_store, clock):
    """A write by a path that tells no one (or a notice lost with a dropped connection)."""
    server = serve(check_seconds=0.2)
    other = open_store()
    with other.transaction():
        other.delegation_zone.publish(NAME, TOKEN, clock.now() + dt.timedelta(hours=1), clock.now())
    until(lambda: answered(server, TOKEN), "the value answered after the serial moved")


def test_an_expired_value_is_left_out_before_the_purge_while_a_later_one_is_answered(zone):
    zone.publish(NAME, TOKEN)
    zone.clock.advance(1800)
    zone.publish(NAME, "later")
    zone.clock.advance(1800)
    assert values(zone.server.udp(NAME)) == ["later"]
    assert values(zone.server.tcp(NAME, "ANY")) == ["later"]


def test_the_view_reports_each_load_with_its_serial(serve, zone):
    """What the confirmation reports of this server: the serial it answers from."""
    loads: list[int] = []
    zone.server.server.view.on_load(loads.append)
    zone.publish(NAME, TOKEN)
    serial = zone.records.store.delegation_zone.serial()
    until(lambda: serial in loads, "the load reported")
    assert zone.server.server.view.serial == serial
