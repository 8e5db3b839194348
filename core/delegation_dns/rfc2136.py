"""``mode = "rfc2136"``: challenge values written to the operator's primary nameserver by dynamic
update (RFC 2136) signed with TSIG (RFC 8945), for an operator who already runs BIND, Knot or
PowerDNS for the zone. Sent over TCP: an update is never truncated, and a lost answer is an error
rather than a silent retransmission. A value is confirmed once the primary and each of its
``secondaries`` answer it (confirm.py)."""

from __future__ import annotations

import asyncio
import os
import struct

import dns.exception
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TXT
import dns.tsig
import dns.update

from core.addresses import parse_nameserver
from core.config import DelegationDnsConfig
from core.delegation_dns import TXT_TTL, ChallengeRecordsError, challenge_name, challenge_value
from core.delegation_dns.confirm import not_answering, until_confirmed

#: How long one update (or check-config's query) waits for the server.
TIMEOUT_SECONDS = 10.0

#: What each refusal means, for the operator.
_RCODES = {
    dns.rcode.NOTAUTH: "it does not accept the TSIG key, or is not authoritative for the zone: check tsig_key_name, "
                       "tsig_secret and tsig_algorithm against its configuration, and that it serves the zone",
    dns.rcode.REFUSED: "it does not serve the zone, or does not let this key update it",
    dns.rcode.NOTZONE: "the name is outside the zone it serves",
    dns.rcode.SERVFAIL: "it failed to apply the update (see its log)",
}


class DynamicUpdate:
    def __init__(self, config: DelegationDnsConfig, *, timeout: float = TIMEOUT_SECONDS) -> None:
        self.zone = config.zone
        self.server = config.server
        self.host, self.port = parse_nameserver(config.server)
        self.secondaries = list(config.secondaries)
        self.timeout = timeout
        self.key_name = config.tsig_key_name
        self.key = dns.tsig.Key(config.tsig_key_name, config.tsig_secret, config.tsig_algorithm)

    async def publish(self, name: str, value: str, *, order_url: str | None = None) -> None:
        """``order_url`` is not kept: the operator's server keeps the value until it is withdrawn."""
        update = self._update()
        update.add(challenge_name(name, self.zone) + ".", TXT_TTL, _txt(challenge_value(value)))
        await self._send(update, f"publish the challenge record at {name}")

    async def withdraw(self, name: str, value: str) -> None:
        update = self._update()
        update.delete(challenge_name(name, self.zone) + ".", _txt(value))
        await self._send(update, f"withdraw the challenge record at {name}")

    async def confirm(self, name: str, value: str, *, within: float) -> list[str]:
        """The primary and each of its ``secondaries`` asked for the value, until each answers it."""
        name = challenge_name(name, self.zone)
        servers = [self.server, *self.secondaries]
        return await until_confirmed(lambda: not_answering(servers, name, value), within)

    def _update(self) -> dns.update.UpdateMessage:
        return dns.update.UpdateMessage(self.zone + ".", keyring=self.key)

    async def _send(self, update: dns.update.UpdateMessage, what: str) -> None:
        try:
            answer = await self._exchange(update)
        except Exception as exc:
            raise ChallengeRecordsError(f"Cannot {what}: {self._failure(exc)}.") from exc
        if answer.rcode() != dns.rcode.NOERROR:
            raise ChallengeRecordsError(f"Cannot {what}: {self._refusal(answer.rcode())}.")

    async def _exchange(self, request: dns.message.Message) -> dns.message.Message:
        """Send ``request`` (signed) over TCP; its answer, whose signature must check out. An error
        answer may come unsigned (a server that does not serve the zone does not sign for it):
        it changes nothing, so its rcode is read anyway, to say why."""
        wire = request.to_wire()
        async with asyncio.timeout(self.timeout):
            reader, writer = await asyncio.open_connection(self.host, self.port)
            try:
                writer.write(struct.pack("!H", len(wire)) + wire)
                (size,) = struct.unpack("!H", await reader.readexactly(2))
                answer = await reader.readexactly(size)
            finally:
                writer.close()
        try:
            return dns.message.from_wire(answer, keyring=request.keyring, request_mac=request.mac)
        except dns.tsig.PeerError:
            raise
        except dns.exception.DNSException:
            unsigned = dns.message.from_wire(answer, keyring=False)
            if unsigned.rcode() == dns.rcode.NOERROR:
                raise
            return unsigned

    def _refusal(self, rcode: dns.rcode.Rcode) -> str:
        why = _RCODES.get(rcode, "see its log")
        return f"the nameserver {self.server} answered {rcode.to_text(rcode)}: {why}"

    def _failure(self, exc: Exception) -> str:
        """A request without an answer, or with one that fails its TSIG check."""
        if isinstance(exc, dns.tsig.PeerError):  # the server says why it refused the signature
            return (f"the nameserver {self.server} refused the TSIG signature ({_tsig_error(exc)}): check "
                    f"tsig_key_name, tsig_secret and tsig_algorithm against its configuration")
        if isinstance(exc, TimeoutError):
            return f"the nameserver {self.server} did not answer within {self.timeout:g} seconds"
        if isinstance(exc, asyncio.IncompleteReadError):
            return f"the nameserver {self.server} closed the connection without an answer"
        if isinstance(exc, OSError):
            return f"cannot reach the nameserver {self.server}: {os.strerror(exc.errno) if exc.errno else exc}"
        if isinstance(exc, dns.exception.DNSException):
            return f"the nameserver {self.server} gave an answer that cannot be used ({exc})"
        raise exc

    async def check(self) -> str:
        """For check-config: ask the server the zone's SOA, signed with the key: whether it answers
        for the zone and takes the key, else why not."""
        query = dns.message.make_query(self.zone + ".", dns.rdatatype.SOA)
        query.use_tsig(self.key)
        try:
            answer = await self._exchange(query)
        except Exception as exc:
            raise ChallengeRecordsError(f"Cannot ask for the SOA of {self.zone}: {self._failure(exc)}.") from exc
        if answer.rcode() != dns.rcode.NOERROR or not answer.answer:
            raise ChallengeRecordsError(f"Cannot ask for the SOA of {self.zone}: {self._refusal(answer.rcode())}.")
        return f"the nameserver {self.server} answers for {self.zone} and accepts the TSIG key {self.key_name}"


def _txt(value: str) -> dns.rdtypes.ANY.TXT.TXT:
    return dns.rdtypes.ANY.TXT.TXT(dns.rdataclass.IN, dns.rdatatype.TXT, [value.encode()])


def _tsig_error(exc: dns.tsig.PeerError) -> str:
    return {dns.tsig.PeerBadKey: "BADKEY", dns.tsig.PeerBadSignature: "BADSIG", dns.tsig.PeerBadTime: "BADTIME",
            dns.tsig.PeerBadTruncation: "BADTRUNC"}.get(type(exc), type(exc).__name__)
