"""The hot path: an ordinary query (one question, opcode QUERY, at most an EDNS OPT record) read
by hand from its bytes, and its answer written from bytes encoded when the zone was loaded
(view.py), with the query's id, flags and question patched in. A dnspython message costs 0.5 ms
of CPU to parse and render; this, a few microseconds.

Anything else (another opcode, several questions, TSIG, a zone transfer, an EDNS version other
than 0, bytes that do not parse) is left to dnspython (answers.py), which answers the same way
this does for what both handle: the tests ask both.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.delegation_dns.view import Zone

#: UDP answers without EDNS, and the most any EDNS payload size gets (DNS Flag Day 2020).
UDP_PLAIN, UDP_MAX = 512, 1232
TCP_MAX = 65535

_HEADER = struct.Struct("!HHHHHH")
_TAIL = struct.Struct("!HH")
_OPT = struct.Struct("!HHIH")  # after the root name: type 41, payload size, extended rcode/version/flags, length
#: Our OPT record: the root, type 41, the payload we take in (UDP_MAX), version 0, no flags or options.
OPT_RECORD = b"\x00" + _OPT.pack(41, UDP_MAX, 0, 0)
#: A pointer to the question's name: for a question at the apex, the zone's name.
AT_APEX = b"\xc0\x0c"
_QR, _AA, _TC, _RD = 0x8000, 0x0400, 0x0200, 0x0100
NOERROR, NXDOMAIN, REFUSED = 0, 3, 5
_A_SOA, _A_NS, _A_TXT, _A_ANY, _A_IXFR, _A_AXFR = 6, 2, 16, 255, 251, 252


def answer(zone: Zone, zone_wire: bytes, wire: bytes, *, udp: bool, now: float) -> tuple[bytes, int] | None:
    """The answer to ``wire`` and its rcode, or None when the query is not an ordinary one (for
    dnspython). ``zone_wire``: the zone's name in wire form, lower case."""
    size = len(wire)
    if size < 17:
        return None
    query_id, flags, questions, answers, authority, additional = _HEADER.unpack_from(wire)
    if flags & 0xF800 or questions != 1 or answers or authority or additional > 1:  # QR, or an opcode but QUERY
        return None
    starts = []
    pos = 12
    try:
        while length := wire[pos]:
            if length > 63:
                return None
            starts.append(pos)
            pos += length + 1
    except IndexError:
        return None
    end = pos + 1
    if end - 12 > 255 or end + 4 > size:
        return None
    rdtype, rdclass = _TAIL.unpack_from(wire, end)
    question_end = end + 4
    payload = UDP_PLAIN
    opt = b""
    if additional:
        if question_end + 11 > size or wire[question_end]:
            return None
        kind, offered, ttl, length = _OPT.unpack_from(wire, question_end + 1)
        if kind != 41 or ttl & 0x00FF0000 or question_end + 11 + length != size:  # another record, version, junk
            return None
        payload, opt = min(max(offered, UDP_PLAIN), UDP_MAX), OPT_RECORD
    elif question_end != size:
        return None
    if rdtype in (_A_AXFR, _A_IXFR):
        return None
    limit = payload if udp else TCP_MAX
    reply = _QR | (flags & _RD)
    apex = end - len(zone_wire)
    if rdclass != 1 or apex < 12 or wire[apex:end].lower() != zone_wire or apex not in starts:
        return _written(query_id, reply | REFUSED, wire[12:question_end], b"", 0, 0, opt, limit), REFUSED
    reply |= _AA
    rcode, count, body = NOERROR, 0, b""
    if apex == 12:
        if rdtype in (_A_SOA, _A_ANY):
            count, body = 1, AT_APEX + zone.soa_tail
        if rdtype in (_A_NS, _A_ANY):
            count, body = count + zone.ns_count, body + zone.ns_records
    elif apex == 13 + wire[12]:  # one label under the zone: a challenge name
        entry = zone.entry(wire[13:apex].lower(), now)
        if entry is None:
            rcode = NXDOMAIN
        elif rdtype in (_A_TXT, _A_ANY):
            count, body = len(entry.values), entry.txt
    else:
        rcode = NXDOMAIN
    if count:
        return _written(query_id, reply, wire[12:question_end], body, count, 0, opt, limit), NOERROR
    soa = struct.pack("!H", 0xC000 | apex) + zone.soa_tail
    return _written(query_id, reply | rcode, wire[12:question_end], soa, 0, 1, opt, limit), rcode


def _written(query_id: int, flags: int, question: bytes, body: bytes, answers: int, authority: int, opt: bytes,
             limit: int) -> bytes:
    """The answer's bytes; past ``limit``, truncated: TC, no records but the OPT."""
    additional = 1 if opt else 0
    if 12 + len(question) + len(body) + len(opt) > limit:
        return _HEADER.pack(query_id, flags | _TC, 1, 0, 0, additional) + question + opt
    return _HEADER.pack(query_id, flags, 1, answers, authority, additional) + question + body + opt


def truncated(wire: bytes) -> bytes:
    """``wire``, an answer, as sent when rate limiting slips it: TC, the question kept, no records
    (a resolver asks again over TCP, which no spoofed source can)."""
    query_id, flags, questions, _, _, _ = _HEADER.unpack_from(wire)
    pos = 12
    for _ in range(questions):  # written uncompressed, as the first name of a message always is
        while length := wire[pos]:
            pos += length + 1
        pos += 5
    return _HEADER.pack(query_id, flags | _TC, questions, 0, 0, 0) + wire[12:pos]
