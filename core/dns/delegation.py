"""Whether a zone's nameservers answer for it: the one question about a lame delegation.

A zone delegated to nameservers that do not serve it is broken for good, not for a minute: every
resolver, and every certificate authority, fails the same way. A resolver only says SERVFAIL (or
times out), so the service asks what it cannot: the parent zone's own servers for their referral
(the NS names, and the glue addresses, that the registrar published), then each of those
nameservers directly for the zone's SOA, without recursion.

A nameserver answers for the zone when it replies NOERROR or NXDOMAIN with the authoritative (AA)
flag. Anything else is said as it happened: no answer before the timeout, the port closed (an
ICMP "port unreachable" on a connected socket), REFUSED, SERVFAIL, or a reply without the AA flag.
The probe is dnspython's message on a socket of our own: dnspython's asyncio query does not
report a closed port, only a timeout.

dnspython is imported by the functions that use it, when first asked: its import was a tenth of
the service's start-up, which no request waits for since (issue 49).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Literal

import attrs

if TYPE_CHECKING:
    import dns.message

Outcome = Literal["answers", "timeout", "closed", "refused", "servfail", "not_authoritative", "error"]


@attrs.frozen
class ServerCheck:
    """How one of a zone's nameservers answered a question about the zone."""

    nameserver: str
    address: str
    outcome: Outcome
    detail: str = ""

    @property
    def answers(self) -> bool:
        return self.outcome == "answers"

    def said(self, timeout: float) -> str:
        """``ns1.example.com (192.0.2.1): no answer within 2 s``: for a DNS administrator."""
        how = {
            "answers": "answers for the zone",
            "timeout": f"no answer within {timeout:g} s",
            "closed": "nothing listens on its DNS port (port unreachable)",
            "refused": "answers REFUSED (it does not serve the zone)",
            "servfail": "answers SERVFAIL (it has the zone configured, but no usable data for it)",
            "not_authoritative": "answers, but not authoritatively (it does not serve the zone itself)",
            "error": f"could not be asked ({self.detail})",
        }[self.outcome]
        return f"{self.nameserver} ({self.address}): {how}"


@attrs.frozen
class Delegation:
    """A zone, who named its nameservers, and how each of them answered."""

    zone: str
    parent: str | None
    "The zone whose referral named the nameservers; None when the resolvers' NS answer did."
    checks: tuple[ServerCheck, ...]
    unasked: tuple[str, ...] = ()
    "Nameservers with no address the service may dial (or none at all): not judged."

    @property
    def silent(self) -> tuple[ServerCheck, ...]:
        return tuple(check for check in self.checks if not check.answers)

    @property
    def lame(self) -> bool:
        """None of the nameservers asked answers for the zone."""
        return bool(self.checks) and not any(check.answers for check in self.checks)

    @property
    def partly_lame(self) -> bool:
        return bool(self.silent) and not self.lame


@attrs.frozen
class Referral:
    """What a parent zone's server says of a child zone: its nameservers, with glue where given."""

    zone: str
    nameservers: tuple[str, ...]
    glue: dict[str, tuple[str, ...]]


class _OneAnswer(asyncio.DatagramProtocol):
    def __init__(self, answer: asyncio.Future[bytes]) -> None:
        self.answer = answer

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        if not self.answer.done():
            self.answer.set_result(data)

    def error_received(self, exc: Exception) -> None:
        if not self.answer.done():
            self.answer.set_exception(exc)


async def _ask(address: str, port: int, query: dns.message.Message, timeout: float) -> dns.message.Message:
    """One UDP exchange on a connected socket, so a closed port is told apart from silence.
    Raises ``TimeoutError``, ``ConnectionRefusedError`` (closed), ``OSError``, a DNS exception
    (a reply that cannot be read), or ``ValueError`` (a reply to another question)."""
    import dns.message

    loop = asyncio.get_running_loop()
    answer: asyncio.Future[bytes] = loop.create_future()
    transport, _ = await loop.create_datagram_endpoint(lambda: _OneAnswer(answer), remote_addr=(address, port))
    try:
        transport.sendto(query.to_wire())
        reply = dns.message.from_wire(await asyncio.wait_for(answer, timeout))
    finally:
        transport.close()
    if not query.is_response(reply):
        raise ValueError("the reply answers another question")
    return reply


def _query(name: str, rtype: str) -> dns.message.Message:
    import dns.flags
    import dns.message

    query = dns.message.make_query(name, rtype)
    query.flags &= ~dns.flags.RD  # a nameserver is asked about its own data, never to recurse
    return query


async def check_server(nameserver: str, address: str, port: int, zone: str, timeout: float) -> ServerCheck:
    """Ask one nameserver for the zone's SOA; never raises."""
    import dns.exception
    import dns.flags
    import dns.rcode

    def checked(outcome: Outcome, detail: str = "") -> ServerCheck:
        return ServerCheck(nameserver=nameserver, address=address, outcome=outcome, detail=detail)

    try:
        reply = await _ask(address, port, _query(zone, "SOA"), timeout)
    except TimeoutError:
        return checked("timeout")
    except ConnectionRefusedError:
        return checked("closed")
    except (OSError, ValueError, dns.exception.DNSException) as exc:
        return checked("error", str(exc) or type(exc).__name__)
    rcode = reply.rcode()
    if rcode == dns.rcode.REFUSED:
        return checked("refused")
    if rcode == dns.rcode.SERVFAIL:
        return checked("servfail")
    if rcode not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
        return checked("error", f"it answered {dns.rcode.to_text(rcode)}")
    if not reply.flags & dns.flags.AA:
        return checked("not_authoritative")
    return checked("answers")


async def referral(address: str, port: int, name: str, timeout: float) -> Referral | None:
    """The parent server's referral for ``name`` (the zone cut at or above it, below the parent);
    None when it gives none (no answer, the name is the parent's own, or it does not exist)."""
    import dns.exception
    import dns.rcode
    import dns.rdatatype

    try:
        reply = await _ask(address, port, _query(name, "NS"), timeout)
    except (OSError, TimeoutError, ValueError, dns.exception.DNSException):
        return None
    if reply.rcode() != dns.rcode.NOERROR or reply.answer:
        return None
    cuts = [rrset for rrset in reply.authority if rrset.rdtype == dns.rdatatype.NS]
    if not cuts:
        return None
    cut = cuts[0]
    nameservers = tuple(sorted({rdata.target.to_text().rstrip(".").lower() for rdata in cut}))
    glue: dict[str, tuple[str, ...]] = {}
    for rrset in reply.additional:
        if rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
            owner = rrset.name.to_text().rstrip(".").lower()
            glue[owner] = glue.get(owner, ()) + tuple(rdata.address for rdata in rrset)
    return Referral(zone=cut.name.to_text().rstrip(".").lower(), nameservers=nameservers, glue=glue)
