"""The one way the service reaches a destination a user supplied (webhook URLs, the HTTPS scan,
Domain Connect discovery).

Endpoints the operator configures (the edge provider's API, the identity provider) are trusted
and reached directly elsewhere. A URL or hostname that came from a user goes only through this
module, which defends against:

- SSRF into the operator's network: a webhook URL naming 169.254.169.254 (cloud metadata),
  10.0.0.5 or localhost would turn the service into a proxy to places no user may reach. The
  host must be a public DNS name (IP literals in any spelling, localhost, single labels and
  special-use names are refused before any lookup), and every address it resolves to is judged
  by ``AddressPolicy`` against the IANA special-purpose registries. Those rules, which need no
  I/O, live in core/outbound/policy.py; this module does the lookups and the requests.
- DNS rebinding: a name can answer a public address when checked and a private one when used.
  Names are resolved by ``GuardedResolver``, which Tornado's TCPClient asks for the addresses it
  then dials, so the addresses connected to are exactly the ones judged; and every request
  resolves again, since a check at registration proves nothing at send time.
- Redirects: never followed (a Location header could point anywhere); a 3xx is an answer.
- Exhaustion: a bounded pool of kept connections (core/outbound/http.py ``KeepAliveClient``, reused only
  for an address the latest lookup still allows), one deadline on the whole request, and at most
  ``max_body_bytes`` of an answer read.

Names are resolved only through ``[dns] nameservers`` (core/dns/lookups.py), never getaddrinfo, which
would accept ``127.1`` or ``2130706433`` and consult /etc/hosts.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

import attrs
from tornado.iostream import UnsatisfiableReadError
from tornado.netutil import Resolver

from core.config import ConfigError, DnsConfig, NetworkConfig
from core.dns.lookups import DnsChecker, Lookup
from core.outbound.http import MAX_HEADER_BYTES, KeepAliveClient, RequestTimeout
from core.outbound.policy import (
    AddressPolicy,
    DestinationRefused,
    IPAddress,
    OutboundFailure,
    Target,
    check_host,
    check_url,
    dial_address,
    parse_ip,
)

__all__ = [
    "AddressPolicy", "DestinationRefused", "GuardedResolver", "NoAddress", "OutboundClient", "OutboundError",
    "OutboundFailure", "OutboundResponse", "Target", "check_host", "check_url",
]


log = logging.getLogger(__name__)
#: Addresses of one name dialled at most, per family (IPv4, IPv6), by a webhook attempt or a scan.
ADDRESSES_PER_FAMILY = 2


class OutboundError(OutboundFailure):
    """The destination could not be reached: DNS, connection, TLS or a timeout."""


class NoAddress(OutboundError):
    """DNS answered, and the name has no address: it does not exist, or has no A/AAAA records."""


@attrs.frozen
class OutboundResponse:
    status_code: int
    body: bytes
    "At most ``max_body_bytes`` of what the destination sent."
    duration_ms: float
    truncated: bool = False
    "The destination sent more than ``max_body_bytes``; the rest was not read."


def _dns_failure(host: str, lookups: list[Lookup]) -> str:
    outcomes = {lookup.outcome for lookup in lookups}
    if "timeout" in outcomes:
        return f"The DNS lookup of {host} timed out."
    if "error" in outcomes:
        detail = next(lookup.detail for lookup in lookups if lookup.outcome == "error")
        return f"The DNS lookup of {host} failed ({detail or 'no answer'})."
    if outcomes == {"nxdomain"}:
        return f"{host} does not exist in DNS (NXDOMAIN)."
    return f"{host} has no address records ({' or '.join(lookup.rtype for lookup in lookups)})."


def _dialled(addresses: list[IPAddress]) -> list[IPAddress]:
    """The first ``ADDRESSES_PER_FAMILY`` of each family, in DNS order: a name with hundreds of
    records must not make one webhook attempt or one anonymous scan open hundreds of connections."""
    kept: list[IPAddress] = []
    for version in (4, 6):
        kept += [ip for ip in addresses if ip.version == version][:ADDRESSES_PER_FAMILY]
    return [ip for ip in addresses if ip in kept]


class GuardedResolver(Resolver):
    """A Tornado resolver that returns only the addresses the policy allows, looked up in the service's DNS."""

    def initialize(self, dns: DnsChecker, policy: AddressPolicy) -> None:
        self.dns = dns
        self.policy = policy

    async def addresses(self, host: str, family: socket.AddressFamily = socket.AF_UNSPEC) -> list[IPAddress]:
        """The allowed addresses of ``host``, ready to dial; OutboundError when DNS gives none."""
        literal = parse_ip(host)
        if literal is not None:
            found = [host]
        else:
            rtypes = {socket.AF_INET: ("A",), socket.AF_INET6: ("AAAA",)}.get(family, ("A", "AAAA"))
            found, lookups = await self.dns.addresses(host, rtypes)
            if not found:
                failure = NoAddress if {lookup.outcome for lookup in lookups} <= {"nxdomain", "nodata"} else OutboundError
                raise failure(_dns_failure(host, lookups))
        allowed: list[IPAddress] = []
        refused: list[str] = []
        for text in found:
            ip = parse_ip(text)
            why = f"{text} is not an address" if ip is None else self.policy.refusal(ip)
            if why is None:
                allowed.append(dial_address(ip))  # type: ignore[arg-type]
            else:
                refused.append(why)
        # Refused addresses are dropped, never dialled; with none left the destination is refused.
        if not allowed:
            if literal is not None:
                raise DestinationRefused(f"The host {refused[0]}.")
            # The addresses stay in the log: telling callers would make this a lookup tool into
            # the operator's internal DNS (the scan answers anonymous callers).
            log.info("refused %s: it resolves only to non-public addresses (%s)", host, "; ".join(refused))
            raise DestinationRefused(
                f"{host} resolves only to non-public addresses (loopback, private, link-local or others "
                "the service may not reach)."
            )
        return _dialled(list(dict.fromkeys(allowed)))

    async def resolve(
        self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC
    ) -> list[tuple[int, Any]]:
        return [
            (socket.AF_INET, (str(ip), port)) if ip.version == 4 else (socket.AF_INET6, (str(ip), port, 0, 0))
            for ip in await self.addresses(host, family)
        ]

    def close(self) -> None:
        """Nothing to let go of: each lookup opens and closes its own channel."""


class OutboundClient:
    """HTTPS requests to user-supplied destinations, through the guard, on a bounded pool of its own."""

    def __init__(self, network: NetworkConfig, dns: DnsConfig, max_clients: int = 64,
                 max_body_bytes: int = 64 * 1024, observe: Callable[[Lookup], None] | None = None) -> None:
        self.policy = AddressPolicy(network.allow_private_ranges)
        self.resolver: GuardedResolver = GuardedResolver(dns=DnsChecker(dns, observe=observe), policy=self.policy)
        self.max_body_bytes = max_body_bytes
        # The operator's bundle is loaded now, so that one start-up would refuse is refused at once;
        # the system's CAs alone, when the first request goes out.
        tls = tls_context(network.ca_bundle) if network.ca_bundle else functools.partial(tls_context, "")
        self.pool = KeepAliveClient(max_clients=max_clients, ssl_context=tls, max_body_bytes=max_body_bytes)

    def close(self) -> None:
        self.pool.close()

    async def resolve(self, host: str) -> list[IPAddress]:
        """The addresses of a user-supplied ``host`` the service may connect to (for the HTTPS scan)."""
        return await self.resolver.addresses(check_host(host))

    async def check_destination(self, url: str) -> Target:
        """Registration-time check: the URL is acceptable and its host resolves to an allowed address.

        Raises ``DestinationRefused`` for every problem, a failed DNS lookup included.
        """
        target = check_url(url, policy=self.policy)
        try:
            await self.resolver.addresses(target.host)
        except OutboundError as exc:
            raise DestinationRefused(exc.reason) from None
        return target

    async def post(self, url: str, *, body: bytes, headers: dict[str, str], timeout: float) -> OutboundResponse:
        """POST ``body`` to ``url``; any answer (3xx included) is returned, failures raise ``OutboundFailure``."""
        return await self._request("POST", url, body=body, headers=headers, timeout=timeout)

    async def get(self, url: str, *, headers: dict[str, str], timeout: float) -> OutboundResponse:
        """GET ``url``; any answer (3xx included) is returned, failures raise ``OutboundFailure``."""
        return await self._request("GET", url, body=b"", headers=headers, timeout=timeout)

    async def _request(self, method: str, url: str, *, body: bytes, headers: dict[str, str],
                       timeout: float) -> OutboundResponse:
        target = check_url(url, policy=self.policy)  # again: the rules may have changed since registration
        started = time.monotonic()
        addresses = await self.resolver.resolve(target.host, target.port)  # and the DNS answer too
        try:
            # No redirect is followed (a Location could point anywhere: a 3xx is the answer) and
            # nothing is decompressed (no decompression bomb behind the size cap).
            answer = await self.pool.request(
                method, host=target.host, port=target.port, path=target.path_and_query, addresses=addresses,
                headers=headers, body=body, timeout=timeout,
            )
        except Exception as exc:  # noqa: BLE001 - every way a request can fail becomes an OutboundFailure
            raise _failure(exc, target, timeout) from None
        return OutboundResponse(status_code=answer.code, body=answer.body, duration_ms=_ms(started),
                                truncated=answer.truncated)


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


def tls_context(ca_bundle: str) -> ssl.SSLContext:
    """The TLS context of every outbound connection; ``check-config`` builds it too, so a bundle
    start-up would refuse is refused there.

    Built once per bundle (as it is on disk): loading the system's CAs takes 40 ms, and the context
    is only read once built, so every client of the process may share it."""
    try:
        stamp = os.stat(ca_bundle).st_mtime_ns if ca_bundle else 0
    except OSError:
        stamp = -1  # refused by the load below, with the reason
    return _tls_context(ca_bundle, stamp)


@functools.lru_cache(maxsize=8)
def _tls_context(ca_bundle: str, stamp: int) -> ssl.SSLContext:
    # Certificates are always verified, against the system's CAs plus the operator's bundle when
    # set (Tornado's ca_certs would replace the system store instead of adding to it).
    context = ssl.create_default_context()
    if ca_bundle:
        try:
            context.load_verify_locations(cafile=ca_bundle)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"network.ca_bundle: cannot load {ca_bundle}: {exc}") from None
    return context


def _failure(exc: Exception, target: Target, timeout: float) -> OutboundFailure:
    """What went wrong, worded for the user."""
    if isinstance(exc, OutboundFailure):
        return exc  # from the resolver: refused addresses or a failed lookup
    where = target.host if target.port == 443 else f"{target.host}:{target.port}"
    if isinstance(exc, RequestTimeout):
        return OutboundError(f"The request to {where} timed out after {timeout:g} s ({exc.phase}).")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return OutboundError(f"TLS certificate verification failed: {str(exc.verify_message).rstrip('.')}.")
    if isinstance(exc, ssl.SSLError):
        return OutboundError(f"The TLS handshake with {where} failed: {exc.reason or exc}.")
    if isinstance(exc, ConnectionRefusedError):
        return OutboundError(f"{where} refused the connection.")
    if isinstance(exc, ConnectionResetError):
        # Tornado closes an answer that is not HTTP without saying so: the two look the same here.
        return OutboundError(f"{where} closed the connection before answering, or answered in something other than HTTP.")
    if isinstance(exc, OSError):
        return OutboundError(f"Could not connect to {where}: {exc.strerror or exc}.")
    if isinstance(exc, UnsatisfiableReadError):
        return OutboundError(f"{where} sent response headers longer than {MAX_HEADER_BYTES // 1024} KiB.")
    # The library's own words name its internals (buffers, regular expressions): logged, not shown.
    log.info("unreadable answer from %s: %r", where, exc)
    return OutboundError(f"{where} sent an answer that could not be read as HTTP.")
