"""What the built-in server answers, from a query's bytes to the answer's: an authoritative server
for the delegation zone alone, and nothing else.

- At the apex: the SOA and the NS records (``[delegation_dns] nameservers``).
- One label under it: the TXT values live in the store (``acme_challenges``) at that name, read
  at every query, so every process on the database answers the same, at once.
- Any other name in the zone: NXDOMAIN; another type at a name that exists: NODATA. Both carry the
  SOA in the authority section (RFC 2308), whose TTL and minimum (60 s) bound how long a resolver
  remembers that a value is not there yet.
- A name outside the zone, a class other than IN, a zone transfer: REFUSED. No recursion, ever.

UDP answers fit 512 bytes, or the EDNS payload the query offers (at most 1232, the size that
avoids fragmentation); a larger one goes out truncated (TC, no records) and the resolver asks
again over TCP, where 64 KiB fit.
"""

from __future__ import annotations

import logging
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

from core.delegation_dns import SOA_EXPIRE, SOA_REFRESH, SOA_RETRY, TXT_TTL
from store import unavailable_reason

if TYPE_CHECKING:
    from core.clock import Clock
    from core.config import DelegationDnsConfig
    from store import Store

log = logging.getLogger("delegation_dns")

#: UDP answers without EDNS, and the most any EDNS payload size gets (DNS Flag Day 2020).
UDP_PLAIN, UDP_MAX = 512, 1232
TCP_MAX = 65535
#: The SOA's TTL and minimum: how long a resolver may remember a name's absence (RFC 2308).
NEGATIVE_TTL = 60
NS_TTL = 3600
#: The SOA's refresh, retry and expire: those the secondaries are sent (issue 47 item 4, transfers.py).
REFRESH, RETRY, EXPIRE = SOA_REFRESH, SOA_RETRY, SOA_EXPIRE
_IN, _TXT, _SOA, _NS, _ANY = (dns.rdataclass.IN, dns.rdatatype.TXT, dns.rdatatype.SOA, dns.rdatatype.NS,
                              dns.rdatatype.ANY)
_TRANSFERS = (dns.rdatatype.AXFR, dns.rdatatype.IXFR)


class Answers:
    def __init__(self, config: DelegationDnsConfig, store: Store, clock: Clock) -> None:
        self.zone = dns.name.from_text(config.zone)
        self.store = store
        self.clock = clock
        self.ns = dns.rrset.from_text_list(self.zone, NS_TTL, _IN, _NS,
                                           [dns.name.from_text(ns).to_text() for ns in config.nameservers])
        self.mname = dns.name.from_text(config.nameservers[0])
        self.rname = dns.name.from_text("hostmaster", self.zone)
        self._soa: dns.rrset.RRset | None = None
        self._serial = -1

    def soa(self) -> dns.rrset.RRset:
        """The SOA, its serial the time in seconds: it never goes back, in any process (made
        again when the second changes)."""
        serial = int(self.clock.timestamp()) & 0xFFFFFFFF
        if self._soa is None or serial != self._serial:
            self._soa = dns.rrset.from_text(self.zone, NEGATIVE_TTL, _IN, _SOA, f"{self.mname} {self.rname} {serial} "
                                            f"{REFRESH} {RETRY} {EXPIRE} {NEGATIVE_TTL}")
            self._serial = serial
        return self._soa

    async def answer(self, wire: bytes, *, udp: bool) -> bytes | None:
        """The answer to the query ``wire``; None when there is none to give (a response, or
        bytes too short to hold a header)."""
        try:
            query = dns.message.from_wire(wire)
        except dns.message.ShortHeader:
            return None
        except Exception:  # noqa: BLE001 - whatever the bytes hold, the server keeps answering
            return formerr(wire)
        if query.flags & dns.flags.QR:
            return None
        response = dns.message.make_response(query, our_payload=UDP_MAX)
        try:
            await self._fill(query, response)
        except Exception as exc:
            if (why := unavailable_reason(exc)) is None:
                raise
            log.warning("delegation DNS: cannot read the challenge records: %s", why)
            response = dns.message.make_response(query, our_payload=UDP_MAX)
            response.set_rcode(dns.rcode.SERVFAIL)
        limit = min(max(query.payload, UDP_PLAIN), UDP_MAX) if udp and query.edns >= 0 else UDP_PLAIN if udp else TCP_MAX
        try:
            return response.to_wire(max_size=limit)
        except dns.exception.TooBig:
            for section in (response.answer, response.authority, response.additional):
                del section[:]
            response.flags |= dns.flags.TC
            return response.to_wire(max_size=limit)

    async def _fill(self, query: dns.message.Message, response: dns.message.Message) -> None:
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
        response.flags |= dns.flags.AA
        depth = len(name) - len(self.zone)
        if depth == 0:
            found = [rrset for rrset in (self.soa(), self.ns) if rdtype in (rrset.rdtype, _ANY)]
            response.answer.extend(found)
            if not found:
                response.authority.append(self.soa())
            return
        values: list[str] = []
        if depth == 1:  # challenge names are one label under the zone; nothing exists deeper
            values = await self.store.run(self.store.delegation_zone.values, name.to_text(omit_final_dot=True),
                                          self.clock.now())
        if values and rdtype in (_TXT, _ANY):
            response.answer.append(dns.rrset.from_rdata_list(name, TXT_TTL, [
                dns.rdtypes.ANY.TXT.TXT(_IN, _TXT, [value.encode()]) for value in values]))
            return
        if not values:
            response.set_rcode(dns.rcode.NXDOMAIN)
        response.authority.append(self.soa())


def formerr(wire: bytes) -> bytes | None:
    """FORMERR for bytes that do not parse as a query, from their header alone (id, opcode, RD)."""
    query_id, flags = struct.unpack_from("!HH", wire)
    if flags & dns.flags.QR:
        return None
    flags = dns.flags.QR | (flags & (0x7800 | dns.flags.RD)) | dns.rcode.FORMERR
    return struct.pack("!HHHHHH", query_id, flags, 0, 0, 0, 0)
