"""Zone transfers of the delegation zone to its secondaries: the built-in server as the hidden primary
of NSD or Knot (``[delegation_dns] secondaries``), for operators who want those to face the internet.

- AXFR (RFC 5936) and IXFR (RFC 1995) over TCP, to the listed addresses alone, the query and every
  message of the answer signed with the TSIG key (RFC 8945). Another address: REFUSED, whatever it
  sends; a listed one without a signature: REFUSED; a bad signature or an unknown key: NOTAUTH.
- IXFR sends the journal's changes (``store.delegation_zone``) since the secondary's serial, change
  by change; from a serial the journal no longer reaches back to, the whole zone as AXFR would
  (RFC 1995 section 4). Over UDP, IXFR is answered with the SOA alone: the secondary is current, or
  asks again over TCP (RFC 1995 section 2).
- A listed secondary's other signed queries: its SOA query (Knot asks the SOA, signed, before it
  transfers) is answered signed; others are refused, signed.

The zone a secondary is sent holds every value the store holds at its serial, expired or not: a
value leaves the zone by a change (the periodic purge, core/runtime/jobs.py) and its NOTIFY, so that
the IXFR that removes it finds it at the secondary. The serial is the store's count of changes,
served modulo 2**32 (RFC 1982).
"""

from __future__ import annotations

import ipaddress
import logging
import struct
from itertools import groupby
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
import dns.tsig

from core.addresses import parse_nameserver
from core.delegation_dns import SOA_EXPIRE, SOA_REFRESH, SOA_RETRY, TXT_TTL
from core.delegation_dns.answers import NEGATIVE_TTL, NS_TTL, formerr
from store import unavailable_reason

if TYPE_CHECKING:
    from core.config import DelegationDnsConfig
    from core.metrics import Metrics
    from store import Store
    from store.delegation_zone import Change

log = logging.getLogger("delegation_dns")

AXFR, IXFR = int(dns.rdatatype.AXFR), int(dns.rdatatype.IXFR)
SERIAL_SPACE = 2**32
#: About how many bytes of records go in one message of a transfer: well under 64 KiB, whatever the
#: last record added (at most 530 bytes: a 255-byte name and a 255-byte value).
MESSAGE_BYTES = 16000
_IN, _TXT, _SOA = dns.rdataclass.IN, dns.rdatatype.TXT, dns.rdatatype.SOA
_TSIG_ERRORS = (dns.message.UnknownTSIGKey, dns.tsig.BadSignature, dns.tsig.BadKey, dns.tsig.BadTime,
                dns.tsig.BadAlgorithm)


def question_type(wire: bytes) -> int | None:
    """The type asked by the first question, read from the bytes alone (no message is built for the
    queries that are not transfers); None when they hold no question."""
    if len(wire) < 12 or struct.unpack_from("!H", wire, 4)[0] == 0:
        return None
    at = 12
    while at < len(wire) and wire[at] != 0:
        if wire[at] >= 0x40:  # a pointer, or a label type nobody sends in a question
            return None
        at += 1 + wire[at]
    if at + 5 > len(wire):
        return None
    return int(struct.unpack_from("!H", wire, at + 1)[0])


def peer_address(peer: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address of a socket's peer (``getpeername()``, a datagram's sender), IPv4 when it came mapped in IPv6."""
    host = peer[0] if isinstance(peer, tuple) and peer else peer
    try:
        address = ipaddress.ip_address(str(host).partition("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def soa_rrset(config: DelegationDnsConfig, serial: int) -> dns.rrset.RRset:
    """The zone's SOA at ``serial`` (a count: its low 32 bits are served)."""
    zone = dns.name.from_text(config.zone)
    return dns.rrset.from_text(zone, NEGATIVE_TTL, _IN, _SOA,
                               f"{dns.name.from_text(config.nameservers[0])} {dns.name.from_text('hostmaster', zone)} "
                               f"{serial % SERIAL_SPACE} {SOA_REFRESH} {SOA_RETRY} {SOA_EXPIRE} {NEGATIVE_TTL}")


def tsig_key(config: DelegationDnsConfig) -> dns.tsig.Key:
    return dns.tsig.Key(config.tsig_key_name, config.tsig_secret, config.tsig_algorithm)


class Transfers:
    """Answers the zone's transfers, and its secondaries' signed queries, from the store."""

    def __init__(self, config: DelegationDnsConfig, store: Store, metrics: Metrics | None = None) -> None:
        self.config = config
        self.zone = dns.name.from_text(config.zone)
        self.store = store
        self.metrics = metrics
        self.secondaries = {peer_address(parse_nameserver(secondary)) for secondary in config.secondaries}
        key = tsig_key(config)
        self.keyring = {key.name: key}
        self.ns = dns.rrset.from_text_list(self.zone, NS_TTL, _IN, dns.rdatatype.NS,
                                           [dns.name.from_text(ns).to_text() for ns in config.nameservers])

    async def answer(self, wire: bytes, peer: object, *, udp: bool) -> list[bytes] | None:
        """The messages that answer the query ``wire`` from ``peer`` when it asks a transfer, or is a
        listed secondary's signed query; None for any other query (answers.py answers it)."""
        rdtype = question_type(wire)
        if rdtype is None or wire[2] & 0x80:  # QR: a response, not a query
            return None
        listed = peer_address(peer) in self.secondaries
        signed = struct.unpack_from("!H", wire, 10)[0] > 0
        if rdtype not in (AXFR, IXFR) and not (listed and signed):
            return None
        kind = "axfr" if rdtype == AXFR else "ixfr" if rdtype == IXFR else "query"
        if not listed:
            log.info("delegation DNS: transfer refused to %s, which is not in delegation_dns.secondaries", peer_address(peer))
            return self._refusal(wire, kind, dns.rcode.REFUSED, "refused")
        try:
            query = dns.message.from_wire(wire, keyring=self.keyring)
        except _TSIG_ERRORS as exc:
            log.warning("delegation DNS: a query from the secondary %s is not signed with the key "
                        "delegation_dns.tsig_key_name (%s): NOTAUTH", peer_address(peer), type(exc).__name__)
            return self._refusal(wire, kind, dns.rcode.NOTAUTH, "bad_signature")
        except dns.exception.DNSException:
            answer = formerr(wire)
            return [answer] if answer is not None else []
        if not query.had_tsig:
            if kind == "query":
                return None
            log.warning("delegation DNS: an unsigned %s from the secondary %s: REFUSED (it must sign with the key "
                        "delegation_dns.tsig_key_name)", kind.upper(), peer_address(peer))
            return self._refusal(wire, kind, dns.rcode.REFUSED, "refused")
        try:
            return await self._signed(query, kind, udp=udp)
        except Exception as exc:
            if (why := unavailable_reason(exc)) is None:
                raise
            log.warning("delegation DNS: cannot read the zone for a transfer: %s", why)
            return [self._rcode(query, dns.rcode.SERVFAIL)]

    async def _signed(self, query: dns.message.Message, kind: str, *, udp: bool) -> list[bytes]:
        question = query.question[0] if len(query.question) == 1 else None
        if (query.opcode() != dns.opcode.QUERY or question is None or question.rdclass != _IN
                or question.name != self.zone or (kind == "query" and question.rdtype != _SOA)
                or (kind == "axfr" and udp)):
            self._count(kind, "refused")
            return [self._rcode(query, dns.rcode.REFUSED)]
        since: int | None = None
        if kind == "ixfr":
            theirs = [rrset for rrset in query.authority if rrset.rdtype == _SOA]
            if not theirs:
                return [self._rcode(query, dns.rcode.FORMERR)]
            since = int(theirs[0][0].serial)
        serial, values, changes = await self.store.run(self._read, since)
        soa = soa_rrset(self.config, serial)
        if kind == "query" or (kind == "ixfr" and (udp or since == serial % SERIAL_SPACE)):
            self._count(kind, "current" if since == serial % SERIAL_SPACE else "soa")
            return self._messages(query, [soa])
        if changes is None:
            self._count(kind, "full")
            return self._messages(query, [soa, self.ns, *self._txt(values), soa])
        self._count(kind, "incremental")
        records = [soa]
        for changed, made in groupby(changes, key=lambda change: change.serial):
            made_by = list(made)
            records.append(soa_rrset(self.config, changed - 1))
            records.extend(self._txt([(c.name, c.value) for c in made_by if not c.added]))
            records.append(soa_rrset(self.config, changed))
            records.extend(self._txt([(c.name, c.value) for c in made_by if c.added]))
        records.append(soa)
        return self._messages(query, records)

    def _read(self, since: int | None) -> tuple[int, list[tuple[str, str]], list[Change] | None]:
        """The serial, the values, and the changes since the secondary's serial ``since`` (None: the
        whole zone is sent)."""
        zone = self.store.delegation_zone
        serial, values = zone.contents()
        if since is None:
            return serial, values, None
        # The count whose low 32 bits are the secondary's serial, at or before ours.
        theirs = serial - (serial - since) % SERIAL_SPACE
        changes = zone.changes_since(theirs)
        return serial, values, None if changes is None else [c for c in changes if c.serial <= serial]

    def _txt(self, values: list[tuple[str, str]]) -> list[dns.rrset.RRset]:
        return [dns.rrset.from_rdata_list(dns.name.from_text(name), TXT_TTL, [
            dns.rdtypes.ANY.TXT.TXT(_IN, _TXT, [value.encode()]) for _, value in at])
            for name, at in groupby(sorted(values), key=lambda value: value[0])]

    def _messages(self, query: dns.message.Message, records: list[dns.rrset.RRset]) -> list[bytes]:
        """``records`` in as many messages as they need, each signed, the later ones continuing the
        first's signature (RFC 8945 section 5.3.1); the question in the first alone (RFC 5936)."""
        chunks: list[list[dns.rrset.RRset]] = [[]]
        size = 0
        for rrset in records:
            cost = sum(len(rdata.to_wire() or b"") + 24 for rdata in rrset) + len(rrset.name.to_wire() or b"")
            if chunks[-1] and size + cost > MESSAGE_BYTES:
                chunks.append([])
                size = 0
            chunks[-1].append(rrset)
            size += cost
        wires: list[bytes] = []
        context = None
        for chunk in chunks:
            response = dns.message.make_response(query)
            response.flags |= dns.flags.AA
            if wires:
                response.question = []
            response.answer.extend(chunk)
            wires.append(response.to_wire(max_size=65535, multi=True, tsig_ctx=context))
            context = response.tsig_ctx
        return wires

    def _rcode(self, query: dns.message.Message, rcode: dns.rcode.Rcode) -> bytes:
        response = dns.message.make_response(query)
        response.set_rcode(rcode)
        return response.to_wire()

    def _refusal(self, wire: bytes, kind: str, rcode: dns.rcode.Rcode, outcome: str) -> list[bytes]:
        """``rcode``, unsigned: the signature, if any, is not checked (``keyring=False``)."""
        self._count(kind, outcome)
        try:
            query = dns.message.from_wire(wire, keyring=False)
        except dns.exception.DNSException:
            answer = formerr(wire)
            return [answer] if answer is not None else []
        return [self._rcode(query, rcode)]

    def _count(self, kind: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.zone_transfers.labels(kind, outcome).inc()
