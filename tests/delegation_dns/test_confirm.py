"""Issue 47, item 3: a new challenge value confirmed at every authoritative server of the zone before
the CA is asked: each process's built-in server (by the serial it says it answers from), the
primary and secondaries of ``mode = "rfc2136"`` and the secondaries of a hidden primary (asked over
DNS). Each server that does not answer is named. Real servers: the built-in one in a thread, Knot."""

from __future__ import annotations

import asyncio
import datetime as dt

import attrs
import pytest

from core.config import DelegationDnsConfig
from core.delegation_dns.confirm import wall_clock
from core.delegation_dns.records import StoredRecords
from core.delegation_dns.rfc2136 import DynamicUpdate
from tests.delegation_dns.conftest import ZONE
from tests.patience import PATIENCE_SECONDS
from tests.servers import knot
from tests.servers.knot import KnotServer

NAME = f"k7q2x.{ZONE}"
TOKEN = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"
needs_knot = pytest.mark.skipif(knot.missing(), reason="needs knotd (Debian package knot)")


def records_of(server, open_store, clock, **options) -> StoredRecords:
    return StoredRecords(ZONE, open_store(), clock, listen=server.config.listen, **options)


def published(records, name: str = NAME, value: str = TOKEN, within: float = PATIENCE_SECONDS) -> list[str]:
    """The servers that do not answer ``value`` once it is published, after ``within`` seconds at most."""
    asyncio.run(records.publish(name, value))
    return asyncio.run(records.confirm(name, value, within=within))


def test_a_value_is_confirmed_once_the_servers_answer_it(serve, open_store, clock):
    records = records_of(serve(), open_store, clock)
    assert published(records) == []


def test_each_processs_server_says_the_serial_it_answers_from(serve, open_store):
    serve(process="first pid 1"), serve(process="second pid 2")
    store = open_store()
    serial = store.delegation_zone.serial()
    assert store.delegation_zone.servers(wall_clock() - dt.timedelta(minutes=1)) == {
        "first pid 1": serial, "second pid 2": serial}


def test_a_server_behind_is_named_with_the_serial_it_answers_from(serve, open_store, clock):
    records = records_of(serve(), open_store, clock)
    with records.store.transaction():
        records.store.delegation_zone.answering("behind pid 9", 3, wall_clock() + dt.timedelta(minutes=1))
    [missing] = published(records, within=0.5)
    assert missing.startswith("the built-in server of process behind pid 9 answers from serial 3, before the value's")


def test_a_stopped_server_is_not_waited_for(serve, open_store, clock):
    running, stopped = serve(), serve(process="stopped pid 3")
    stopped.stop()
    assert published(records_of(running, open_store, clock), within=0.5) == []


def test_a_listen_address_that_does_not_answer_the_value_is_named(serve, open_store, clock):
    records = records_of(serve(), open_store, clock)
    records.listen = "127.0.0.1:9"  # nothing answers there
    [missing] = published(records, within=0.5)
    assert missing.startswith("the built-in server listening on 127.0.0.1:9 ")


@pytest.fixture(scope="module")
def behind(tmp_path_factory):
    """A second Knot serving the zone, which no update reaches: a secondary whose transfer has not come."""
    server = KnotServer(tmp_path_factory.mktemp("knot-behind"), ZONE).start()
    yield server
    server.stop()


def rfc2136(nameserver: KnotServer, *secondaries: KnotServer) -> DelegationDnsConfig:
    return DelegationDnsConfig(zone=ZONE, mode="rfc2136", server=nameserver.address, tsig_key_name=knot.KEY_NAME,
                               tsig_secret=nameserver.secret, tsig_algorithm=knot.ALGORITHM,
                               secondaries=[s.address for s in secondaries])


@needs_knot
def test_rfc2136_confirms_a_value_the_primary_answers(nameserver):
    assert published(DynamicUpdate(rfc2136(nameserver)), f"primary.{ZONE}") == []


@needs_knot
def test_rfc2136_names_a_secondary_that_does_not_answer_the_value(nameserver, behind):
    name = f"secondary.{ZONE}"
    assert published(DynamicUpdate(rfc2136(nameserver, behind)), name, within=0.5) == [
        f"the nameserver {behind.address} answers NXDOMAIN for {name}"]


@needs_knot
def test_rfc2136_confirms_once_the_secondary_answers_the_value(nameserver, behind):
    name = f"caught-up.{ZONE}"
    records = DynamicUpdate(rfc2136(nameserver, behind))
    asyncio.run(DynamicUpdate(attrs.evolve(rfc2136(behind))).publish(name, TOKEN))  # its transfer came
    assert published(records, name) == []


@needs_knot
def test_a_hidden_primary_names_a_secondary_that_does_not_answer_the_value(serve, open_store, clock, behind):
    records = records_of(serve(), open_store, clock, secondaries=[behind.address])
    name = f"hidden.{ZONE}"
    assert published(records, name, within=0.5) == [f"the nameserver {behind.address} answers NXDOMAIN for {name}"]
