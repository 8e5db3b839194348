"""What the built-in server answers, from a query's bytes to the answer's: an authoritative server
for the delegation zone alone, and nothing else.

- At the apex: the SOA (its serial the zone's, moved by every change) and the NS records
  (``[delegation_dns] nameservers``).
- One label under it: the TXT values live at that name, answered from the zone in memory
  (view.py), which every process keeps current from the store.
- Any other name in the zone: NXDOMAIN; another type at a name that exists: NODATA. Both carry the
  SOA in the authority section (RFC 2308), whose TTL and minimum (60 s) bound how long a resolver
  remembers that a value is not there yet.
- A name outside the zone, a class other than IN, a zone transfer: REFUSED. No recursion, ever.

UDP answers fit 512 bytes, or the EDNS payload the query offers (at most 1232, the size that
avoids fragmentation); a larger one goes out truncated (TC, no records) and the resolver asks
again over TCP, where 64 KiB fit.

An ordinary query is answered by wire.py from bytes encoded beforehand; dnspython here answers the
rest (other opcodes, several questions, EDNS versions, TSIG, transfers, malformed bytes).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TXT
import dns.rrset

from core.delegation_dns import SOA_EXPIRE, SOA_REFRESH, SOA_RETRY, TXT_TTL, wire
from core.delegation_dns.view import NEGATIVE_TTL, NS_TTL
from core.delegation_dns.wire import TCP_MAX, UDP_MAX, UDP_PLAIN

if TYPE_CHECKING:
    from core.clock import Clock
    from core.config import DelegationDnsConfig
    from core.delegation_dns.view import ZoneView

__all__ = ["NEGATIVE_TTL", "NS_TTL", "UDP_MAX", "UDP_PLAIN", "Answers", "formerr"]

_IN, _TXT, _SOA, _NS, _ANY = (dns.rdataclass.IN, dns.rdatatype.TXT, dns.rdatatype.SOA, dns.rdatatype.NS,
                              dns.rdatatype.ANY)
_TRANSFERS = (dns.rdatatype.AXFR, dns.rdatatype.IXFR)


class Answers:
    def __init__(self, config: DelegationDnsConfig, view: ZoneView, clock: Clock) -> None:
        self.zone = dns.name.from_text(config.zone)
        self.view = view
        self.clock = clock
        self.ns = dns.rrset.from_text_list(self.zone, NS_TTL, _IN, _NS,
                                           [dns.name.from_text(ns).to_text() for ns in config.nameservers])
        self.mname = dns.name.from_text(config.nameservers[0])
        self.rname = dns.name.from_text("hostmaster", self.zone)
        self._soa: dns.rrset.RRset | None = None
        self._serial = -1

    def answer(self, query: bytes, *, udp: bool) -> tuple[bytes, int] | None:
        """The answer to the query's bytes and its rcode; None when there is none to give (a
        response, or bytes too short to hold a header)."""
        zone = self.view.zone
        if zone is not None:
            fast = wire.answer(zone, self.view.zone_wire, query, udp=udp, now=self.clock.timestamp())
            if fast is not None:
                return fast
        return self.slowly(query, udp=udp)

    def soa(self, serial: int) -> dns.rrset.RRset:
        """The SOA at the zone's ``serial`` (served modulo 2**32)."""
        if self._soa is None or serial != self._serial:
            self._soa = dns.rrset.from_text(self.zone, NEGATIVE_TTL, _IN, _SOA, f"{self.mname} {self.rname} "
                                            f"{serial & 0xFFFFFFFF} {SOA_REFRESH} {SOA_RETRY} {SOA_EXPIRE} {NEGATIVE_TTL}")
            self._serial = serial
        return self._soa

    def slowly(self, wire_: bytes, *, udp: bool) -> tuple[bytes, int] | None:
        """The answer by dnspython's messages: for what the hot path leaves."""
        try:
            query = dns.message.from_wire(wire_)
        except dns.message.ShortHeader:
            return None
        except Exception:  # noqa: BLE001 - whatever the bytes hold, the server keeps answering
            answer = formerr(wire_)
            return None if answer is None else (answer, dns.rcode.FORMERR)
        if query.flags & dns.flags.QR:
            return None
        response = dns.message.make_response(query, our_payload=UDP_MAX)
        self._fill(query, response)
        limit = min(max(query.payload, UDP_PLAIN), UDP_MAX) if udp and query.edns >= 0 else UDP_PLAIN if udp else TCP_MAX
        try:
            answer = response.to_wire(max_size=limit)
        except dns.exception.TooBig:
            for section in (response.answer, response.authority, response.additional):
                del section[:]
            response.flags |= dns.flags.TC
            answer = response.to_wire(max_size=limit)
        return answer, response.rcode()

    def _fill(self, query: dns.message.Message, response: dns.message.Message) -> None:
        if query.opcode() != dns.opcode.QUERY:
            response.set_rcode(dns.rcode.NOTIMP)
            return
        if query.edns > 0:
            response.set_rcode(dns.rcode.BADVERS)
            return
        if len(query.question) != 1:
            response.set_rcode(dns.rcode.FORMERR)
            return
        question = query.question[0]
        name, rdtype = question.name, question.rdtype
        if question.rdclass != _IN or not name.is_subdomain(self.zone) or rdtype in _TRANSFERS:
            response.set_rcode(dns.rcode.REFUSED)
            return
        zone = self.view.zone
        if zone is None:  # never loaded: the database could not be read since start-up
            response.set_rcode(dns.rcode.SERVFAIL)
            return
        response.flags |= dns.flags.AA
        depth = len(name) - len(self.zone)
        soa = self.soa(zone.serial)
        if depth == 0:
            found = [rrset for rrset in (soa, self.ns) if rdtype in (rrset.rdtype, _ANY)]
            response.answer.extend(found)
            if not found:
                response.authority.append(soa)
            return
        values: list[str] = []
        if depth == 1:  # challenge names are one label under the zone; nothing exists deeper
            values = self.view.values(name.labels[0].lower(), self.clock.timestamp())
        if values and rdtype in (_TXT, _ANY):
            response.answer.append(dns.rrset.from_rdata_list(name, TXT_TTL, [
                dns.rdtypes.ANY.TXT.TXT(_IN, _TXT, [value.encode()]) for value in values]))
            return
        if not values:
            response.set_rcode(dns.rcode.NXDOMAIN)
        response.authority.append(soa)


def formerr(query: bytes) -> bytes | None:
    """FORMERR for bytes that do not parse as a query, from their header alone (id, opcode, RD)."""
    query_id, flags = struct.unpack_from("!HH", query)
    if flags & dns.flags.QR:
        return None
    flags = dns.flags.QR | (flags & (0x7800 | dns.flags.RD)) | dns.rcode.FORMERR
    return struct.pack("!HHHHHH", query_id, flags, 0, 0, 0, 0)
