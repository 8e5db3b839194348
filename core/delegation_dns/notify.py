"""NOTIFY (RFC 1996) to the delegation zone's secondaries (``[delegation_dns] secondaries``), after
each change this process commits: a challenge value published or withdrawn, expired values purged.
The process that wrote the change tells them, so that on PostgreSQL, with several processes, each
change is told once, by its writer.

A NOTIFY goes over UDP, signed with the TSIG key, with the zone's SOA at the new serial, and is sent
again until the secondary acknowledges it (``ATTEMPT_SECONDS``: the wait for each attempt). It never
holds up the write: ``changed`` only starts the telling, in the background. Changes made while a
secondary is being told are told once more after it acknowledges (the latest serial). A secondary
that acknowledges none still catches up at its next refresh (the SOA's, a minute).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import dns.asyncquery
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdatatype

from core.addresses import parse_nameserver
from core.delegation_dns.transfers import soa_rrset, tsig_key

if TYPE_CHECKING:
    from core.config import DelegationDnsConfig
    from core.metrics import Metrics

log = logging.getLogger("delegation_dns")

#: How long each attempt waits for the acknowledgement, attempt after attempt (about 15 s in all).
ATTEMPT_SECONDS = (0.5, 1.0, 2.0, 4.0, 8.0)


class Notifier:
    def __init__(self, config: DelegationDnsConfig, metrics: Metrics | None = None, *,
                 attempt_seconds: tuple[float, ...] = ATTEMPT_SECONDS) -> None:
        self.config = config
        self.metrics = metrics
        self.attempt_seconds = attempt_seconds
        self.secondaries = list(config.secondaries)
        self.key = tsig_key(config)
        self._serial: int | None = None
        self._changes = 0
        self._telling: dict[str, asyncio.Task[None]] = {}

    def changed(self, serial: int | None = None) -> None:
        """The zone changed (to ``serial``, when known): tell every secondary, in the background. Called
        on the event loop."""
        self._changes += 1
        if serial is not None:
            self._serial = serial if self._serial is None else max(self._serial, serial)
        for secondary in self.secondaries:
            telling = self._telling.get(secondary)
            if telling is None or telling.done():
                self._telling[secondary] = asyncio.ensure_future(self._tell(secondary))

    async def wait(self) -> None:
        """Until every secondary is told (or given up on): for shutdown and tests."""
        await asyncio.gather(*self._telling.values(), return_exceptions=True)

    async def _tell(self, secondary: str) -> None:
        while True:
            told = self._changes
            await self._notify(secondary)
            if self._changes == told:
                return

    async def _notify(self, secondary: str) -> None:
        host, port = parse_nameserver(secondary)
        for attempt, seconds in enumerate(self.attempt_seconds):
            try:
                response = await dns.asyncquery.udp(self._message(), host, port=port, timeout=seconds)
            except (dns.exception.DNSException, OSError) as exc:
                self._count(secondary, "unanswered")
                if attempt == len(self.attempt_seconds) - 1:
                    log.warning("delegation DNS: the secondary %s acknowledged no NOTIFY (%s): it gets the change at "
                                "its next refresh", secondary, type(exc).__name__)
                continue
            if response.rcode() == dns.rcode.NOERROR:
                self._count(secondary, "acknowledged")
                return
            # Refused: asking again changes nothing; the secondary's allow-notify or key is wrong.
            self._count(secondary, "refused")
            log.warning("delegation DNS: the secondary %s answered NOTIFY with %s: check that it allows NOTIFY from "
                        "this address with the key %s", secondary, dns.rcode.to_text(response.rcode()),
                        self.config.tsig_key_name)
            return
        self._count(secondary, "given_up")

    def _message(self) -> dns.message.Message:
        message = dns.message.make_query(self.config.zone, dns.rdatatype.SOA, flags=dns.flags.AA)
        message.set_opcode(dns.opcode.NOTIFY)
        if self._serial is not None:
            message.answer.append(soa_rrset(self.config, self._serial))
        message.use_tsig(self.key)
        return message

    def _count(self, secondary: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.zone_notifies.labels(secondary, outcome).inc()
