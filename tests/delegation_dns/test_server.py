"""The built-in authoritative server of the delegation zone, asked over real UDP and TCP: the SOA
and NS at the apex, the live challenge values as TXT, NXDOMAIN and NODATA with the SOA, REFUSED
for every other zone, no recursion; answers that fit UDP or are truncated for TCP; whatever bytes
arrive, it goes on answering.

The tests that read challenge values run on both backends; those about the protocol alone, on
SQLite (``protocol_only``)."""

from __future__ import annotations

import asyncio
import socket
import struct

import dns.asyncquery
import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import pytest

from core.config import DelegationDnsConfig
from core.delegation_dns import TXT_TTL
from core.delegation_dns.server import DelegationServer
from core.delegation_dns.sockets import bind
from tests.delegation_dns.conftest import NAMESERVERS, ZONE, ask_tcp, receive
from tests.servers.service import free_port

protocol_only = pytest.mark.parametrize("store_backend", ["sqlite"])
NAME = f"k7q2x.{ZONE}"
TOKEN = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"
"A DNS-01 value: the base64url SHA-256 of a key authorization, 43 characters."


def values(answer: dns.message.Message) -> list[str]:
    [rrset] = answer.answer
    assert rrset.rdtype == dns.rdatatype.TXT
    return sorted(b"".join(rdata.strings).decode() for rdata in rrset)


def is_negative_with_soa(answer: dns.message.Message) -> bool:
    """RFC 2308: no answer, and the zone's SOA in the authority section (a resolver caches by it)."""
    return (not answer.answer and [rrset.rdtype for rrset in answer.authority] == [dns.rdatatype.SOA]
            and answer.authority[0].name == dns.name.from_text(ZONE))


# -- the apex --------------------------------------------------------------------------------------

@protocol_only
def test_the_apex_answers_its_soa(zone):
    answer = zone.server.udp(ZONE, "SOA")
    [soa] = answer.answer[0]
    assert answer.rcode() == dns.rcode.NOERROR and answer.flags & dns.flags.AA
    assert (soa.mname.to_text(), soa.rname.to_text(), soa.minimum) == ("ns1.saas.example.", f"hostmaster.{ZONE}.", 60)
    assert answer.answer[0].ttl == 60


@protocol_only
def test_the_soa_serial_is_the_zones_serial_in_the_store(zone):
    """Every process answers the same serial, the one secondaries and the confirmation compare."""
    assert zone.server.udp(ZONE, "SOA").answer[0][0].serial == zone.records.store.delegation_zone.serial() % 2**32


def test_each_change_moves_the_soa_serial_and_time_alone_does_not(zone):
    before = zone.server.udp(ZONE, "SOA").answer[0][0].serial
    zone.clock.advance(5)
    assert zone.server.udp(ZONE, "SOA").answer[0][0].serial == before
    zone.publish(NAME, TOKEN)
    zone.withdraw(NAME, TOKEN)
    assert zone.server.udp(ZONE, "SOA").answer[0][0].serial == before + 2


@protocol_only
def test_the_apex_answers_the_nameservers(zone):
    answer = zone.server.udp(ZONE, "NS")
    assert answer.flags & dns.flags.AA
    assert sorted(rdata.target.to_text() for rdata in answer.answer[0]) == [f"{ns}." for ns in NAMESERVERS]


@protocol_only
def test_another_type_at_the_apex_is_nodata(zone):
    answer = zone.server.udp(ZONE, "A")
    assert answer.rcode() == dns.rcode.NOERROR and answer.flags & dns.flags.AA
    assert is_negative_with_soa(answer)


# -- challenge values ------------------------------------------------------------------------------

def test_a_published_value_is_answered_as_txt(zone):
    zone.publish(NAME, TOKEN)
    answer = zone.server.udp(NAME, "TXT")
    assert answer.rcode() == dns.rcode.NOERROR and answer.flags & dns.flags.AA
    assert values(answer) == [TOKEN] and answer.answer[0].ttl == TXT_TTL == 0


def test_every_value_published_at_a_name_is_answered(zone):
    """An apex and its wildcard validate through the same name at once."""
    zone.publish(NAME, TOKEN, "second-value")
    assert values(zone.server.udp(NAME)) == sorted([TOKEN, "second-value"])


def test_a_withdrawn_value_is_no_longer_answered(zone):
    zone.publish(NAME, TOKEN, "kept")
    zone.withdraw(NAME, TOKEN)
    assert values(zone.server.udp(NAME)) == ["kept"]


def test_a_name_whose_last_value_is_withdrawn_no_longer_exists(zone):
    zone.publish(NAME, TOKEN)
    zone.withdraw(NAME, TOKEN)
    answer = zone.server.udp(NAME)
    assert answer.rcode() == dns.rcode.NXDOMAIN and is_negative_with_soa(answer)


def test_a_value_is_gone_an_hour_after_it_was_published(zone):
    zone.publish(NAME, TOKEN)
    zone.clock.advance(3599)
    assert values(zone.server.udp(NAME)) == [TOKEN]
    zone.clock.advance(1)
    answer = zone.server.udp(NAME)
    assert answer.rcode() == dns.rcode.NXDOMAIN and is_negative_with_soa(answer)


def test_a_name_without_values_does_not_exist(zone):
    answer = zone.server.udp(f"nothing-here.{ZONE}")
    assert answer.rcode() == dns.rcode.NXDOMAIN and answer.flags & dns.flags.AA
    assert is_negative_with_soa(answer)


def test_another_type_at_a_name_with_values_is_nodata(zone):
    zone.publish(NAME, TOKEN)
    answer = zone.server.udp(NAME, "A")
    assert answer.rcode() == dns.rcode.NOERROR and answer.flags & dns.flags.AA
    assert is_negative_with_soa(answer)


@protocol_only
def test_a_name_two_labels_under_the_zone_does_not_exist(zone):
    zone.publish(NAME, TOKEN)
    assert zone.server.udp(f"deeper.{NAME}").rcode() == dns.rcode.NXDOMAIN


def test_names_match_in_any_case_and_the_question_keeps_its_case(zone):
    """Resolvers randomise the case of the names they ask (DNS 0x20) and expect it back."""
    zone.publish(NAME, TOKEN)
    asked = "K7Q2x.AcMe.SaaS.example."
    answer = zone.server.udp(asked)
    assert values(answer) == [TOKEN]
    assert answer.question[0].name.to_text() == asked and answer.answer[0].name.to_text() == asked


def test_a_value_published_by_one_process_is_answered_by_every_other(zone, serve):
    """Two service processes on one database: the value one publishes, the other answers, and
    the other's withdrawal is seen by both."""
    other = serve()
    zone.publish(NAME, TOKEN)
    assert values(zone.server.udp(NAME)) == values(other.udp(NAME)) == [TOKEN]
    zone.withdraw(NAME, TOKEN)
    assert zone.server.udp(NAME).rcode() == other.udp(NAME).rcode() == dns.rcode.NXDOMAIN


@protocol_only
def test_only_names_one_label_under_the_zone_take_values(zone):
    for name in (ZONE, f"deeper.{NAME}", "k7q2x.example.com", f"k7q2x.x{ZONE}"):
        with pytest.raises(ValueError, match="is not a name one label under the delegation zone"):
            zone.publish(name, TOKEN)


@protocol_only
def test_a_value_one_txt_string_cannot_hold_is_not_published(zone):
    with pytest.raises(ValueError, match="a TXT value holds 1 to 255 bytes, not 256"):
        zone.publish(NAME, "x" * 256)


@protocol_only
def test_it_answers_on_an_ipv6_address(open_store, clock):
    port = free_port()
    config = DelegationDnsConfig(zone=ZONE, nameservers=NAMESERVERS, listen=f"[::1]:{port}")

    async def ask() -> dns.message.Message:
        server = DelegationServer(config, open_store(), clock, bind(config.listen))
        await server.start()
        try:
            return await dns.asyncquery.udp(dns.message.make_query(ZONE, "SOA"), "::1", port=port, timeout=5)
        finally:
            await server.stop()

    assert asyncio.run(ask()).answer[0].rdtype == dns.rdatatype.SOA


# -- other zones, no recursion ---------------------------------------------------------------------

@protocol_only
def test_a_name_outside_the_zone_is_refused(zone):
    for name in ("example.com", "saas.example", f"x{ZONE}"):
        answer = zone.server.udp(name, "A")
        assert answer.rcode() == dns.rcode.REFUSED and not answer.flags & dns.flags.AA, name
        assert not answer.answer


@protocol_only
def test_recursion_is_never_offered(zone):
    answer = zone.server.udp("example.com", "A")  # dnspython asks with RD set, as stub resolvers do
    assert answer.flags & dns.flags.RD and not answer.flags & dns.flags.RA
    assert not zone.server.udp(ZONE, "SOA").flags & dns.flags.RA


@protocol_only
def test_a_zone_transfer_is_refused(zone):
    assert zone.server.tcp(ZONE, "AXFR").rcode() == dns.rcode.REFUSED


@protocol_only
def test_another_class_is_refused(zone):
    assert zone.server.udp(ZONE, "SOA", rdclass=dns.rdataclass.CH).rcode() == dns.rcode.REFUSED


@protocol_only
def test_another_opcode_is_not_implemented(zone):
    query = dns.message.make_query(ZONE, "SOA")
    query.set_opcode(dns.opcode.NOTIFY)
    answer = dns.message.from_wire(zone.server.udp_bytes(query.to_wire()))
    assert answer.rcode() == dns.rcode.NOTIMP and answer.id == query.id


@protocol_only
def test_several_questions_are_a_format_error(zone):
    query = dns.message.make_query(ZONE, "SOA")
    query.question.append(dns.rrset.RRset(dns.name.from_text(NAME), dns.rdataclass.IN, dns.rdatatype.TXT))
    assert dns.message.from_wire(zone.server.udp_bytes(query.to_wire())).rcode() == dns.rcode.FORMERR


# -- sizes: UDP, truncation, TCP -------------------------------------------------------------------

def publish_many(zone, count: int) -> list[str]:
    published = [f"{TOKEN[:40]}{n:03d}" for n in range(count)]
    zone.publish(NAME, *published)
    return published


def test_an_answer_too_large_for_udp_is_truncated_and_given_whole_over_tcp(zone):
    published = publish_many(zone, 12)  # 12 x 56 bytes and more: past 512
    truncated = zone.server.udp(NAME)
    assert truncated.flags & dns.flags.TC and not truncated.answer
    assert values(zone.server.tcp(NAME)) == published


def test_an_edns_payload_size_lets_a_larger_answer_through_udp(zone):
    published = publish_many(zone, 12)
    answer = zone.server.udp(NAME, use_edns=0, payload=1232)
    assert not answer.flags & dns.flags.TC and values(answer) == published


@protocol_only
def test_udp_answers_never_exceed_1232_bytes_whatever_payload_is_offered(zone):
    publish_many(zone, 25)  # about 1,500 bytes
    answer = zone.server.udp(NAME, use_edns=0, payload=4096)
    assert answer.flags & dns.flags.TC and not answer.answer
    assert answer.payload == 1232  # what it says it takes in, too


@protocol_only
def test_one_tcp_connection_carries_several_queries(zone):
    zone.publish(NAME, TOKEN)
    with zone.server.connect() as sock:
        first = ask_tcp(sock, dns.message.make_query(ZONE, "SOA"))
        second = ask_tcp(sock, dns.message.make_query(NAME, "TXT"))
    assert first.answer[0].rdtype == dns.rdatatype.SOA and values(second) == [TOKEN]


@protocol_only
def test_an_idle_tcp_connection_is_closed(serve):
    server = serve(idle_seconds=0.1)
    with server.connect() as sock:
        assert sock.recv(1) == b""  # the server's close, after its idle time


@protocol_only
def test_connections_past_the_cap_are_closed_at_once(serve):
    server = serve(max_connections=2)
    with server.connect() as first, server.connect() as second:
        ask_tcp(first, dns.message.make_query(ZONE, "SOA"))
        ask_tcp(second, dns.message.make_query(ZONE, "SOA"))
        with server.connect() as third:
            assert third.recv(1) == b""


# -- malformed packets -----------------------------------------------------------------------------

@protocol_only
def test_a_malformed_query_is_a_format_error_and_the_server_goes_on(zone):
    header = struct.pack("!HHHHHH", 0xBEEF, 0x0100, 1, 0, 0, 0)  # one question, RD; then junk
    answer = dns.message.from_wire(zone.server.udp_bytes(header + b"\x3fnot a name"))
    assert (answer.id, answer.rcode(), bool(answer.flags & dns.flags.RD)) == (0xBEEF, dns.rcode.FORMERR, True)
    assert zone.server.udp(ZONE, "SOA").rcode() == dns.rcode.NOERROR


@protocol_only
def test_bytes_too_short_for_a_header_get_no_answer_and_the_server_goes_on(zone):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.3)
        sock.sendto(b"\x12\x34\x01", ("127.0.0.1", zone.server.port))
        with pytest.raises(TimeoutError):
            sock.recv(512)
    assert zone.server.udp(ZONE, "SOA").rcode() == dns.rcode.NOERROR


@protocol_only
def test_a_malformed_query_over_tcp_is_a_format_error_on_a_connection_that_stays_open(zone):
    junk = struct.pack("!HHHHHH", 7, 0, 1, 0, 0, 0) + b"\xff"
    with zone.server.connect() as sock:
        sock.sendall(struct.pack("!H", len(junk)) + junk)
        (size,) = struct.unpack("!H", receive(sock, 2))
        assert dns.message.from_wire(receive(sock, size)).rcode() == dns.rcode.FORMERR
        assert ask_tcp(sock, dns.message.make_query(ZONE, "SOA")).rcode() == dns.rcode.NOERROR
