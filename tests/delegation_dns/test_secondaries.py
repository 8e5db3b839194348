"""The built-in server as the hidden primary of real secondaries (``[delegation_dns] secondaries``,
core/delegation_dns/transfers.py and notify.py): NSD and Knot, configured as docs/acme.md shows, take
the zone by AXFR and IXFR signed with the TSIG key, and NOTIFY after each change; a value published
or withdrawn through the service's challenge records is answered so by both, soon. Transfers go to
the listed addresses alone, signed, and an IXFR from a serial the journal no longer reaches gets
the whole zone.

The secondaries' tests run on both backends; those about the transfer protocol alone, on SQLite."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig
import pytest

from core.config import DelegationDnsConfig
from core.delegation_dns import CHALLENGE_LIFETIME
from core.delegation_dns.notify import Notifier
from core.delegation_dns.records import StoredRecords, purge_expired
from core.delegation_dns.server import DelegationServer
from core.delegation_dns.transfers import soa_rrset
from core.metrics import Metrics
from store import Store
from tests.delegation_dns.conftest import NAMESERVERS, ZONE, ask_tcp, listening
from tests.patience import PATIENCE_SECONDS
from tests.servers import secondaries
from tests.servers.delegation import InThread
from tests.servers.secondaries import KEY_NAME, KnotSecondary, NsdSecondary, Secondary

pytestmark = pytest.mark.skipif(secondaries.missing(), reason="needs nsd and knotd (Debian packages nsd, knot)")
protocol_only = pytest.mark.parametrize("store_backend", ["sqlite"])
TOKEN = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"
"A DNS-01 value: the base64url SHA-256 of a key authorization, 43 characters."
ANOTHER = "m3Bq0yZ8WnV2xR5tK7pL9cD1fG4hJ6sA8eQ0uI2oY5w"


class Loop:
    """An event loop in a thread of its own, always running, as a service process's is: the NOTIFY a
    write starts goes on after the write returns."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(PATIENCE_SECONDS)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


class HiddenPrimary:
    """The built-in server on 127.0.0.1 with ``secondaries`` listed, on a Store of its own, and the
    challenge records written through another Store, with their NOTIFY, as another process would."""

    def __init__(self, open_store: Callable[[], Store], clock: Any, listed: list[str], secret: str,
                 bound: tuple[int, list[socket.socket]], *, notify: bool) -> None:
        """``bound``: its port and its sockets (``listening``)."""
        self.port, sockets = bound
        self.secret = secret
        self.config = DelegationDnsConfig(zone=ZONE, nameservers=NAMESERVERS, listen=f"127.0.0.1:{self.port}",
                                          secondaries=listed, tsig_key_name=KEY_NAME, tsig_secret=secret)
        self.clock = clock
        self.metrics = Metrics(open_store(), clock)
        self.serving = InThread(DelegationServer(self.config, open_store(), clock, sockets,
                                                 metrics=self.metrics))
        self.store = open_store()
        self.writer_metrics = Metrics(self.store, clock)
        self.notifier = Notifier(self.config, self.writer_metrics)
        self.records = StoredRecords(ZONE, self.store, clock, notifier=self.notifier if notify else None)
        self.loop = Loop()

    def start(self) -> HiddenPrimary:
        self.serving.start()
        return self

    def stop(self) -> None:
        self.loop.run(self.notifier.wait())
        self.loop.stop()
        self.serving.stop()

    def publish(self, name: str, value: str) -> None:
        self.loop.run(self.records.publish(name, value))

    def withdraw(self, name: str, value: str) -> None:
        self.loop.run(self.records.withdraw(name, value))

    def key(self, secret: str | None = None) -> dns.tsig.Key:
        return dns.tsig.Key(KEY_NAME, secret or self.secret, "hmac-sha256")

    def transfer(self, rdtype: str = "AXFR", serial: int = 0, *, secret: str | None = None,
                 source: str = "127.0.0.1") -> list[dns.message.Message]:
        """The messages of a signed transfer, read as a secondary reads them (each one's signature checked)."""
        key = self.key(secret)
        return list(dns.query.xfr("127.0.0.1", ZONE, rdtype=rdtype, serial=serial, port=self.port, timeout=5,
                                  keyring={key.name: key}, keyname=key.name, keyalgorithm=key.algorithm, source=source))

    def ask(self, query: dns.message.Message, source: str = "127.0.0.1") -> dns.message.Message:
        """One query over TCP from ``source``, its answer read unsigned."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5, source_address=(source, 0)) as sock:
            return ask_tcp(sock, query)

    def serial(self) -> int:
        return self.store.delegation_zone.serial()

    def transfers(self, kind: str, outcome: str) -> float:
        value = self.metrics.registry.get_sample_value("cps_delegation_transfers_total", {"kind": kind, "outcome": outcome})
        return value or 0.0


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {PATIENCE_SECONDS} s: {what}")
        time.sleep(0.01)


def answers(secondary: Secondary, name: str) -> list[str]:
    """The TXT values ``secondary`` answers at ``name`` (none while it has not the zone)."""
    try:
        answer = secondary.query(name, "TXT")
    except (dns.exception.Timeout, OSError):
        return []
    return sorted(b"".join(rdata.strings).decode() for rrset in answer.answer for rdata in rrset)


def answered_by_all(made: list[Secondary], name: str, values: list[str]) -> None:
    """Waits until each secondary answers ``values`` at ``name``."""
    for secondary in made:
        until(lambda secondary=secondary: answers(secondary, name) == values,
              f"{secondary.name} answers {values} at {name}")


def records(messages: list[dns.message.Message]) -> list[tuple[str, str]]:
    """A transfer's records in order, as (type, text)."""
    return [(dns.rdatatype.to_text(rrset.rdtype), rdata.to_text()) for message in messages
            for rrset in message.answer for rdata in rrset]


@pytest.fixture
def hidden_primary(open_store, clock) -> Iterator[Callable[..., HiddenPrimary]]:
    started: list[HiddenPrimary] = []

    def start(listed: list[str], secret: str | None = None, bound: tuple[int, list[socket.socket]] | None = None, *,
              notify: bool = False) -> HiddenPrimary:
        """``notify``: NOTIFY after each change (to real secondaries: the others are no one's address)."""
        secret = secret or base64.b64encode(os.urandom(32)).decode()
        started.append(HiddenPrimary(open_store, clock, listed, secret, bound or listening(), notify=notify).start())
        return started[-1]

    yield start
    for primary in started:
        primary.stop()


@pytest.fixture
def with_secondaries(hidden_primary, tmp_path) -> Iterator[tuple[HiddenPrimary, list[Secondary]]]:
    """The hidden primary, and NSD and Knot as its secondaries, each with the zone's first copy."""
    bound, secret = listening(), base64.b64encode(os.urandom(32)).decode()
    made = [kind(tmp_path / kind.name, ZONE, bound[0], secret) for kind in (NsdSecondary, KnotSecondary)]
    for secondary in made:
        secondary.folder.mkdir()
    primary = hidden_primary([secondary.address for secondary in made], secret, bound, notify=True)
    running: list[Secondary] = []
    try:
        for secondary in made:
            running.append(secondary.start())
        serial = primary.serial() % 2**32
        until(lambda: all(_serial(secondary) == serial for secondary in made), "NSD and Knot have the zone")
        yield primary, made
    finally:
        for secondary in running:
            secondary.stop()


def _serial(secondary: Secondary) -> int | None:
    try:
        answer = secondary.query(ZONE, "SOA")
    except (dns.exception.Timeout, OSError):
        return None
    return int(answer.answer[0][0].serial) if answer.answer else None


# -- NSD and Knot, kept by NOTIFY and IXFR ---------------------------------------------------------

def test_a_published_value_is_answered_by_nsd_and_knot(with_secondaries):
    primary, made = with_secondaries
    primary.publish(f"k7q2x.{ZONE}", TOKEN)
    answered_by_all(made, f"k7q2x.{ZONE}", [TOKEN])


def test_a_withdrawn_value_leaves_nsd_and_knot_by_ixfr(with_secondaries):
    primary, made = with_secondaries
    primary.publish(f"k7q2x.{ZONE}", TOKEN)
    primary.publish(f"k7q2x.{ZONE}", ANOTHER)
    primary.withdraw(f"k7q2x.{ZONE}", TOKEN)
    answered_by_all(made, f"k7q2x.{ZONE}", [ANOTHER])
    assert primary.transfers("ixfr", "incremental") >= 2


@protocol_only
def test_expired_values_leave_the_secondaries_once_purged(with_secondaries):
    primary, made = with_secondaries
    primary.publish(f"k7q2x.{ZONE}", TOKEN)
    answered_by_all(made, f"k7q2x.{ZONE}", [TOKEN])
    primary.clock.advance(CHALLENGE_LIFETIME.total_seconds())
    assert purge_expired(primary.store, primary.clock) == 1
    primary.loop.loop.call_soon_threadsafe(primary.notifier.changed, primary.serial())  # as the periodic purge does
    answered_by_all(made, f"k7q2x.{ZONE}", [])


@protocol_only
def test_each_secondary_acknowledges_the_notify(with_secondaries):
    primary, made = with_secondaries
    primary.publish(f"k7q2x.{ZONE}", TOKEN)
    primary.loop.run(primary.notifier.wait())
    for secondary in made:
        assert primary.writer_metrics.registry.get_sample_value(
            "cps_delegation_notifies_total", {"secondary": secondary.address, "outcome": "acknowledged"}) >= 1


# -- who may transfer ------------------------------------------------------------------------------

@protocol_only
def test_a_transfer_to_an_address_not_listed_is_refused(hidden_primary):
    primary = hidden_primary(["127.0.0.1"])
    query = dns.message.make_query(ZONE, "AXFR")
    query.use_tsig(primary.key())
    assert primary.ask(query, source="127.0.0.2").rcode() == dns.rcode.REFUSED


@protocol_only
def test_an_unsigned_transfer_is_refused(hidden_primary):
    primary = hidden_primary(["127.0.0.1"])
    assert primary.ask(dns.message.make_query(ZONE, "AXFR")).rcode() == dns.rcode.REFUSED


@protocol_only
def test_a_transfer_signed_with_another_secret_is_notauth(hidden_primary):
    primary = hidden_primary(["127.0.0.1"])
    query = dns.message.make_query(ZONE, "AXFR")
    query.use_tsig(primary.key(base64.b64encode(os.urandom(32)).decode()))
    assert primary.ask(query).rcode() == dns.rcode.NOTAUTH


@protocol_only
def test_without_secondaries_every_transfer_is_refused(hidden_primary):
    primary = hidden_primary([])
    assert primary.ask(dns.message.make_query(ZONE, "AXFR")).rcode() == dns.rcode.REFUSED


# -- what is transferred ---------------------------------------------------------------------------

@protocol_only
def test_axfr_sends_the_soa_the_nameservers_and_every_value(hidden_primary):
    primary = hidden_primary(["127.0.0.1"])
    primary.publish(f"k7q2x.{ZONE}", TOKEN)
    sent = records(primary.transfer("AXFR"))
    assert [kind for kind, _ in sent] == ["SOA", "NS", "NS", "TXT", "SOA"]
    assert sent[0] == sent[-1] and sent[0][1].split()[2] == str(primary.serial() % 2**32)
    assert sent[3] == ("TXT", f'"{TOKEN}"')


@protocol_only
def test_a_large_zone_goes_in_several_signed_messages(hidden_primary):
    primary = hidden_primary(["127.0.0.1"])
    with primary.store.transaction():
        for n in range(600):
            primary.store.delegation_zone.publish(f"name{n}.{ZONE}", TOKEN, primary.clock.now() + CHALLENGE_LIFETIME,
                                                  primary.clock.now())
    messages = primary.transfer("AXFR")  # dnspython checks each message's signature, continued from the first
    assert len(messages) > 1
    assert sum(1 for kind, _ in records(messages) if kind == "TXT") == 600


@protocol_only
def test_ixfr_sends_the_changes_since_the_secondarys_serial(hidden_primary):
    primary = hidden_primary(["127.0.0.1"])
    primary.publish(f"k7q2x.{ZONE}", TOKEN)
    before = primary.serial()
    primary.publish(f"k7q2x.{ZONE}", ANOTHER)
    primary.withdraw(f"k7q2x.{ZONE}", TOKEN)
    sent = records(primary.transfer("IXFR", serial=before % 2**32))
    serials = [int(text.split()[2]) for kind, text in sent if kind == "SOA"]
    assert serials == [before + 2, before, before + 1, before + 1, before + 2, before + 2]
    assert [kind for kind, _ in sent] == ["SOA", "SOA", "SOA", "TXT", "SOA", "TXT", "SOA", "SOA"]
    assert (sent[3], sent[5]) == (("TXT", f'"{ANOTHER}"'), ("TXT", f'"{TOKEN}"'))


@protocol_only
def test_ixfr_from_a_serial_older_than_the_journal_sends_the_whole_zone(hidden_primary):
    primary = hidden_primary(["127.0.0.1"])
    before = primary.serial()
    primary.publish(f"k7q2x.{ZONE}", TOKEN)
    with primary.store.transaction():
        primary.store.delegation_zone.forget_changes(primary.clock.now() + CHALLENGE_LIFETIME)
    sent = records(primary.transfer("IXFR", serial=before % 2**32))
    assert [kind for kind, _ in sent] == ["SOA", "NS", "NS", "TXT", "SOA"]


@protocol_only
def test_ixfr_from_the_current_serial_sends_the_soa_alone(hidden_primary):
    primary = hidden_primary(["127.0.0.1"])
    primary.publish(f"k7q2x.{ZONE}", TOKEN)
    assert [kind for kind, _ in records(primary.transfer("IXFR", serial=primary.serial() % 2**32))] == ["SOA"]


@protocol_only
def test_ixfr_over_udp_is_answered_with_the_soa_alone(hidden_primary):
    primary = hidden_primary(["127.0.0.1"])
    primary.publish(f"k7q2x.{ZONE}", TOKEN)
    query = dns.message.make_query(ZONE, "IXFR")
    query.authority.append(soa_rrset(primary.config, 1))  # the secondary's serial
    query.use_tsig(primary.key())
    answer = dns.query.udp(query, "127.0.0.1", port=primary.port, timeout=5)
    assert [rrset.rdtype for rrset in answer.answer] == [dns.rdatatype.SOA]
    assert answer.answer[0][0].serial == primary.serial() % 2**32


@protocol_only
def test_a_secondarys_signed_soa_query_is_answered_signed(hidden_primary):
    primary = hidden_primary(["127.0.0.1"])
    query = dns.message.make_query(ZONE, "SOA")
    query.use_tsig(primary.key())
    answer = dns.query.udp(query, "127.0.0.1", port=primary.port, timeout=5)  # dnspython checks the signature
    assert answer.had_tsig and answer.answer[0][0].serial == primary.serial() % 2**32
