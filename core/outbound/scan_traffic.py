"""The HTTPS scan's answer about the customer's traffic record (beyond the spec): does the scanned
name send its visitors to our TLS terminator (core/dns/traffic.py, asked beside the handshake), and
what is served there, in people's words. Only while ``[tls_terminator] traffic_cname`` or
``traffic_addresses`` is set; core/outbound/site_scan.py puts it in ``details.traffic``."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import attrs

from core.dns import traffic

if TYPE_CHECKING:
    from core.outbound.site_scan import ServedCertificate
    from core.services import Services

log = logging.getLogger(__name__)


@attrs.frozen
class TrafficCheck:
    """Does the name send its visitors to our TLS terminator, and what is served there."""

    message: str
    "Both in people's words: where the name points (against where it should) and the certificate served."
    found: list[str]
    "What the name leads to: its CNAME chain's names, then its addresses (only what may be told)."
    reaches_terminator: bool | None = None
    "Absent when the DNS did not say (a lookup timed out or failed)."


def start(services: Services, host: str) -> asyncio.Future[traffic.TrafficFinding] | None:
    """The DNS half, started so that it runs beside the handshake; None while the keys are unset."""
    target = traffic.TrafficTarget.from_config(services.config.tls_terminator)
    if target is None:
        return None
    return asyncio.ensure_future(traffic.check(services.dns, host, target,
                                               lambda ip: services.outbound.policy.refusal(ip) is None))


async def result(pointing: asyncio.Future[traffic.TrafficFinding], host: str, served: ServedCertificate | None,
                 ours: bool | None) -> TrafficCheck:
    """The check's answer once the handshake told what is served (``ours``: ``servedMatchesProvider``)."""
    try:
        finding = await pointing
    except Exception:
        log.exception("HTTPS scan of %s: the traffic check failed unexpectedly", host)
        finding = traffic.TrafficFinding(None, (), f"Whether {host} points at our TLS terminator could not be "
                                         "checked; try again later.")
    return TrafficCheck(message=f"{finding.message} {serves(host, served, ours)}", found=list(finding.found),
                        reaches_terminator=finding.reaches)


def serves(host: str, served: ServedCertificate | None, ours: bool | None) -> str:
    """The certificate found there, in words: ours for the name (known for the caller's own domain),
    another, or one for other names."""
    if served is None:
        return "No certificate could be read there."
    issuer = f" issued by {served.issuer_names[0]}" if served.issuer_names else ""
    if ours:
        return f"It serves our certificate for {host}."
    if not served.matches(host):
        return f"It serves a certificate for {names_of(served)}, not for {host}."
    if ours is False:
        return f"It serves a certificate for {host}{issuer}, but not ours."
    return f"It serves a certificate for {host}{issuer}."


def names_of(served: ServedCertificate) -> str:
    """The certificate's names, the first five and how many more."""
    if not served.names:
        return "no name"
    shown = ", ".join(served.names[:5])
    return shown + (f" and {len(served.names) - 5} more" if len(served.names) > 5 else "")
