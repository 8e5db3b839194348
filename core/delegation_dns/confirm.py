"""Whether every authoritative server of the delegation zone answers a new challenge value, before
the CA is asked to validate it (core/acme/orders.py): CAs ask from several network perspectives at
once, each of which may reach another of the zone's servers, so one server still answering the
zone as it was fails the validation, and counts against the CA's limits.

- ``builtin``: each service process's own server says which serial it answers from (its heartbeat,
  heartbeat.py); the value is confirmed once every server heard from lately answers from the
  serial that added it, or a later one. The listen address is also asked once over DNS: a server
  that says so but does not answer is not confirmed.
- ``builtin`` with ``secondaries`` (the service as hidden primary) and ``rfc2136`` (the primary and
  its ``secondaries``): each server is asked over DNS until it answers the value.

Each server that does not confirm is named, with what it answers, in one sentence an operator can
act on.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable

import dns.asyncquery
import dns.exception
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype

from core.addresses import parse_nameserver

#: How often a confirmation asks again while servers have not caught up.
POLL_SECONDS = 0.2
#: How long one DNS question to a server waits for its answer.
QUERY_SECONDS = 2.0
#: How often a process's server says which serial it answers from, at least (heartbeat.py).
HEARTBEAT_SECONDS = 2.0
#: A server not heard from for this long is gone (its process stopped without saying, or crashed):
#: no confirmation waits for it.
GONE_AFTER = dt.timedelta(seconds=3 * HEARTBEAT_SECONDS)
#: A listen address on every interface, asked on the machine itself.
_ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1"}


def wall_clock() -> dt.datetime:
    """Real time, not the service's clock: whether a process was heard from lately is a matter of
    seconds really passed, whatever time the service's clock says (a test's clock jumps days)."""
    return dt.datetime.now(dt.UTC)


async def until_confirmed(check: Callable[[], Awaitable[list[str]]], within: float) -> list[str]:
    """``check`` asked until it names no server or ``within`` seconds pass: the servers it named last."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        missing = await check()
        if not missing or loop.time() >= deadline:
            return missing
        await asyncio.sleep(min(POLL_SECONDS, max(0.0, deadline - loop.time())))


def behind(servers: dict[str, int], needed: int) -> list[str]:
    """The servers (process -> serial) that answer from a serial before ``needed``, each named."""
    if not servers:
        return [f"no process's built-in server was heard from in the last {GONE_AFTER.total_seconds():g} seconds"]
    return [f"the built-in server of process {process} answers from serial {serial}, before the value's {needed}"
            for process, serial in sorted(servers.items()) if serial < needed]


def local_address(listen: str) -> str:
    """``listen`` as asked from the machine itself (an address on every interface, on loopback)."""
    host, port = parse_nameserver(listen)
    host = _ANY_ADDRESS.get(host, host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def not_answering(addresses: list[str], name: str, value: str, *, what: str = "the nameserver") -> list[str]:
    """Of the servers at ``addresses``, those that do not answer ``value`` at ``name``, each named."""
    said = await asyncio.gather(*(_answers(address, name, value) for address in addresses))
    return [f"{what} {address} {why}" for address, why in zip(addresses, said, strict=True) if why is not None]


async def _answers(address: str, name: str, value: str) -> str | None:
    """None when the server at ``address`` answers ``value`` among the TXT values at ``name``, else
    what it answered instead."""
    host, port = parse_nameserver(address)
    query = dns.message.make_query(name.rstrip(".") + ".", dns.rdatatype.TXT)
    try:
        answer = await dns.asyncquery.udp(query, host, port=port, timeout=QUERY_SECONDS)
        if answer.flags & dns.flags.TC:
            answer = await dns.asyncquery.tcp(query, host, port=port, timeout=QUERY_SECONDS)
    except dns.exception.Timeout:
        return f"did not answer within {QUERY_SECONDS:g} seconds"
    except (OSError, dns.exception.DNSException) as exc:
        return f"could not be asked ({exc})"
    if answer.rcode() != dns.rcode.NOERROR:
        return f"answers {dns.rcode.to_text(answer.rcode())} for {name}"
    values = [b"".join(rdata.strings).decode(errors="replace")
              for rrset in answer.answer if rrset.rdtype == dns.rdatatype.TXT for rdata in rrset]
    if value in values:
        return None
    return f"does not answer the value yet at {name} ({len(values)} other value{'s' if len(values) != 1 else ''} there)"
