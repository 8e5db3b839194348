"""The website HTTPS scan: is TLS properly served on a hostname right now?

``POST /v1/site-scan/https {urlOrDomain}`` takes a bare hostname or an http(s) URL, keeps only its
host (normalised by the same rules as a domain's apex, core/hostnames.py) and checks TLS on
``[site_scan] port`` (443; a port in the URL is ignored). Names are resolved and judged by the
outbound guard (core/outbound/guard.py), and only the addresses it returns are dialled, so a private or
internal destination is never contacted. One typed in (an IP literal, localhost, a special-use name)
is a 400 ``validation_error`` naming the reason; a name without a public address is an ``error`` in
the same words whether it is missing or resolves only to non-public addresses.

The scan is a TLS handshake with SNI, verified against the system CAs plus ``[network]
ca_bundle``; no application data is ever sent. When verification fails, a second handshake with
verification off fetches the certificate so the reason can name what is wrong (it is read with
``cryptography``, never trusted for anything else).

``status``:

- ``secure``: the handshake verified (trusted chain, the name matches, within its validity).
- ``not_secure``: the host was reached but HTTPS is not properly served: the certificate is
  expired or not yet valid, is for another name, or chains to no trusted authority (self-signed,
  unknown CA); nothing accepts connections on the port; no answer within ``[site_scan]
  timeout_seconds``; the server does not speak TLS, or ends the handshake.
- ``error``: the scan could not run: the DNS lookup failed (NXDOMAIN, no address records,
  timeout), the connection failed for another network reason (unreachable), or anything
  unexpected (logged).

``details``: ``httpsReachable`` (a TLS handshake completed, verified or not) and
``certificateValid`` always; ``certificateExpiresAt`` when a certificate was seen; ``chainOk`` when
it could be judged; ``reason`` on anything but ``secure``.

Beyond the spec: for an authenticated caller whose workspace has a domain with exactly this
apex and a latest certificate with a known expiry, ``providerNotAfter`` is that expiry and, when
a certificate was served, ``servedMatchesProvider`` says whether it is the provider's (same
expiry to the second and, once the provider has named its issuer, an issuer whose organisation or
common name contains that name). Anonymous callers and other workspaces' hostnames never get them.

Beyond the spec too, while ``[tls_terminator] traffic_*`` is set: ``traffic``, whether the name leads to
our TLS terminator and what is served there (core/outbound/scan_traffic.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import ssl
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import attrs

from core import hostnames
from core.errors import ValidationError
from core.outbound import scan_traffic
from core.outbound.guard import DestinationRefused, NoAddress, OutboundError, check_host
from core.outbound.policy import IPAddress
from store.records import DEFAULT_ISSUER, Certificate, Workspace

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)

FIELD = "urlOrDomain"
NO_PUBLIC_ADDRESS = (
    "{host} has no public address: it does not exist in DNS, has no address records, or resolves only to "
    "addresses the service may not reach."
)
MAX_INPUT = 2048

SECURE, NOT_SECURE, ERROR = "secure", "not_secure", "error"

# OpenSSL verification codes (X509_V_ERR_*).
_NOT_YET_VALID, _EXPIRED, _HOSTNAME_MISMATCH = 9, 10, 62
#: The chain could not be built to a trusted root: self-signed, unknown or missing issuer.
_UNTRUSTED = frozenset({2, 18, 19, 20, 21, 27})
#: OpenSSL's words for a first answer that is not a TLS record (plain HTTP, SSH, ...).
_NOT_TLS = frozenset({
    "WRONG_VERSION_NUMBER", "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG",
    "HTTP_REQUEST", "HTTPS_PROXY_REQUEST", "RECORD_TOO_LARGE", "WRONG_SSL_VERSION",
})
_TRUST_PROBLEM = "The certificate is not signed by a trusted authority (self-signed or an unknown CA)."


@attrs.frozen
class ScanRequest:
    url_or_domain: str


@attrs.frozen
class ScanDetails:
    https_reachable: bool
    "A TLS handshake completed, verified or not."
    certificate_valid: bool
    certificate_expires_at: dt.datetime | None = None
    chain_ok: bool | None = None
    reason: str | None = None
    served_matches_provider: bool | None = None
    "Beyond the spec: the caller's own domain only."
    provider_not_after: dt.datetime | None = None
    "Beyond the spec: the caller's own domain only."
    traffic: scan_traffic.TrafficCheck | None = None
    "Beyond the spec: while ``[tls_terminator] traffic_*`` is set, whether the name reaches the terminator."


@attrs.frozen
class ScanResult:
    input: str
    normalized_host: str
    status: str
    details: ScanDetails


@attrs.frozen
class ServedCertificate:
    """What the scan read from the certificate a server presented."""

    not_before: dt.datetime
    not_after: dt.datetime
    names: tuple[str, ...]
    "DNS names in subjectAltName, else the subject's common name."
    issuer_names: tuple[str, ...]
    "The issuer's organisation and common name values."

    def matches(self, host: str) -> bool:
        return any(_name_matches(name, host) for name in self.names)


@attrs.frozen
class _Outcome:
    status: str
    details: ScanDetails
    served: ServedCertificate | None = None


async def scan_https(services: Services, request: ScanRequest, workspace: Workspace | None) -> ScanResult:
    """Scan ``request.url_or_domain``; a bad or refused destination is a ``ValidationError``."""
    host = host_of(request.url_or_domain)
    try:
        check_host(host)  # an address, localhost or a special-use name as typed: refused, saying why
    except DestinationRefused as exc:
        raise ValidationError.field(FIELD, exc.reason) from None
    pointing = scan_traffic.start(services, host)  # beside the handshake, not after it
    try:
        addresses = await services.outbound.resolve(host)
    except (DestinationRefused, NoAddress):
        # One answer for a name that resolves only to non-public addresses and one that has none:
        # told apart, anyone could map the names that exist only in the operator's internal DNS.
        outcome = _Outcome(ERROR, ScanDetails(https_reachable=False, certificate_valid=False,
                                              reason=NO_PUBLIC_ADDRESS.format(host=host)))
    except OutboundError as exc:
        outcome = _Outcome(ERROR, ScanDetails(https_reachable=False, certificate_valid=False, reason=exc.reason))
    else:
        try:
            outcome = await _scan(services, host, addresses)
        except Exception:
            log.exception("HTTPS scan of %s failed unexpectedly", host)
            outcome = _Outcome(ERROR, ScanDetails(
                https_reachable=False, certificate_valid=False,
                reason="The scan failed unexpectedly; try again later.",
            ))
    details = outcome.details
    if workspace is not None:
        certificate = await services.store.run(_provider_certificate, services, workspace, host)
        if certificate is not None:
            details = _with_provider(details, certificate, outcome.served)
    if pointing is not None:
        details = attrs.evolve(details, traffic=await scan_traffic.result(
            pointing, host, outcome.served, details.served_matches_provider))
    return ScanResult(input=request.url_or_domain, normalized_host=host, status=outcome.status, details=details)


def host_of(raw: str) -> str:
    """The normalised hostname of a bare hostname or an http(s) URL (its port and path dropped)."""
    text = raw.strip()
    if len(text) > MAX_INPUT:
        raise ValidationError.field(FIELD, f"Enter at most {MAX_INPUT} characters.")
    if "://" in text:
        try:
            parts = urlsplit(text)
            name = parts.hostname or ""
        except ValueError:
            raise ValidationError.field(FIELD, "This is not a valid URL.") from None
        if parts.scheme.lower() not in ("http", "https"):
            raise ValidationError.field(FIELD, "Only http:// and https:// URLs (or a bare hostname) can be scanned.")
        if not name:
            raise ValidationError.field(FIELD, "The URL has no hostname.")
        text = name
    try:
        return hostnames.normalise(text)
    except hostnames.HostnameError as exc:
        raise ValidationError.field(FIELD, str(exc)) from None


# -- the handshakes ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _verifying_context(ca_bundle: str) -> ssl.SSLContext:
    """System CAs plus the operator's bundle (checked loadable at start-up by core/outbound/guard.py)."""
    context = ssl.create_default_context()
    if ca_bundle:
        context.load_verify_locations(cafile=ca_bundle)
    return context


@functools.lru_cache(maxsize=1)
def _inspecting_context() -> ssl.SSLContext:
    """No verification: only to read the certificate of a server that failed verification."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def _handshake(ip: IPAddress, port: int, host: str, context: ssl.SSLContext, deadline: float) -> bytes | None:
    """Connect and complete a TLS handshake with SNI before ``deadline`` (loop time), then close;
    the peer's certificate (DER). No application data is sent."""
    timeout = max(deadline - asyncio.get_running_loop().time(), 0.001)
    async with asyncio.timeout_at(deadline):
        _, writer = await asyncio.open_connection(
            str(ip), port, ssl=context, server_hostname=host, ssl_handshake_timeout=timeout
        )
    try:
        peer: bytes | None = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return peer
    finally:
        # Outside the deadline: a handshake that completed counts even if closing is slow.
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 1.0)
        except OSError:  # TimeoutError and TLS errors included: just drop the connection
            writer.transport.abort()


async def _first_answer(
    addresses: list[IPAddress], port: int, host: str, context: ssl.SSLContext, timeout: float
) -> tuple[IPAddress, bytes | None | BaseException]:
    """Try the addresses in order, all within one ``timeout``; the first that answers at the TLS
    level (a completed handshake or a TLS error) ends it, as does the timeout. Connection
    failures move on to the next address."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: tuple[IPAddress, BaseException] = (addresses[0], TimeoutError())
    for ip in addresses:
        try:
            return ip, await _handshake(ip, port, host, context, deadline)
        except (ssl.SSLError, TimeoutError) as exc:
            return ip, exc
        except OSError as exc:
            last = (ip, exc)
    return last


async def _scan(services: Services, host: str, addresses: list[IPAddress]) -> _Outcome:
    port = services.config.site_scan.port
    timeout = services.config.site_scan.timeout_seconds
    context = _verifying_context(services.config.network.ca_bundle)
    ip, answer = await _first_answer(addresses, port, host, context, timeout)
    if isinstance(answer, ssl.SSLCertVerificationError):
        return await _unverified(ip, port, host, timeout, answer, services.clock.now())
    if isinstance(answer, BaseException):
        return _connection_failure(answer, host, port, timeout)
    served = read_certificate(answer) if answer else None
    return _Outcome(SECURE, ScanDetails(
        https_reachable=True, certificate_valid=True, chain_ok=True,
        certificate_expires_at=served.not_after if served else None,
    ), served)


async def _unverified(
    ip: IPAddress, port: int, host: str, timeout: float, error: ssl.SSLCertVerificationError, now: dt.datetime
) -> _Outcome:
    """Verification failed: look at the certificate without verifying, to say why."""
    served: ServedCertificate | None = None
    try:
        der = await _handshake(ip, port, host, _inspecting_context(), asyncio.get_running_loop().time() + timeout)
        served = read_certificate(der) if der else None
    except (OSError, TimeoutError, ValueError) as exc:
        log.info("HTTPS scan of %s: the unverified handshake failed too: %r", host, exc)
    code = error.verify_code
    problems: list[str] = []
    chain_ok: bool | None = None
    if code in _UNTRUSTED:
        chain_ok = False
    elif code in (_NOT_YET_VALID, _EXPIRED, _HOSTNAME_MISMATCH):
        # OpenSSL checks these only after building the chain to a trusted root.
        chain_ok = True
    # OpenSSL reports one problem; the certificate read here tells the others.
    if code == _HOSTNAME_MISMATCH or (code in _UNTRUSTED and served is not None and not served.matches(host)):
        problems.append(_name_problem(served, host))
    if served is not None and (code == _EXPIRED or served.not_after < now):
        problems.append(f"The certificate expired on {served.not_after:%Y-%m-%d}.")
    elif code == _EXPIRED:
        problems.append("The certificate has expired.")
    elif served is not None and (code == _NOT_YET_VALID or served.not_before > now):
        problems.append(f"The certificate is not valid before {served.not_before:%Y-%m-%d}.")
    elif code == _NOT_YET_VALID:
        problems.append("The certificate is not valid yet.")
    if code in _UNTRUSTED:
        problems.append(_TRUST_PROBLEM)
    if not problems:
        message = str(error.verify_message or error.reason or error).rstrip(".")
        problems.append(f"The certificate was rejected: {message}.")
    return _Outcome(NOT_SECURE, ScanDetails(
        https_reachable=served is not None, certificate_valid=False, chain_ok=chain_ok,
        certificate_expires_at=served.not_after if served else None, reason=" ".join(problems),
    ), served)


def _name_problem(served: ServedCertificate | None, host: str) -> str:
    if served is None:
        return f"The certificate is not for {host}."
    if not served.names:
        return f"The certificate names no host, not {host}."
    return f"The certificate is for {scan_traffic.names_of(served)}, not {host}."


def _connection_failure(exc: BaseException, host: str, port: int, timeout: float) -> _Outcome:
    def outcome(status: str, reason: str) -> _Outcome:
        return _Outcome(status, ScanDetails(https_reachable=False, certificate_valid=False, reason=reason))

    if isinstance(exc, TimeoutError):
        return outcome(NOT_SECURE, f"The server did not answer within {timeout:g} s.")
    if isinstance(exc, ConnectionRefusedError):
        return outcome(NOT_SECURE, f"Nothing accepts connections on port {port}.")
    if isinstance(exc, ssl.SSLError) and exc.reason in _NOT_TLS:
        return outcome(NOT_SECURE, f"The server on port {port} does not speak TLS.")
    if isinstance(exc, (ssl.SSLEOFError, ConnectionResetError, ConnectionAbortedError, EOFError)):
        return outcome(NOT_SECURE, f"The server on port {port} closed the connection during the TLS handshake.")
    if isinstance(exc, ssl.SSLError):
        return outcome(NOT_SECURE, f"The TLS handshake on port {port} failed ({exc.reason or exc}).")
    if isinstance(exc, OSError):
        return outcome(ERROR, f"Could not connect to {host} on port {port} ({exc.strerror or exc}).")
    return outcome(ERROR, "The scan failed unexpectedly; try again later.")


# -- certificates ------------------------------------------------------------------------------


def read_certificate(der: bytes) -> ServedCertificate:
    """The facts the scan reports about a DER certificate."""
    # cryptography's X.509 here, not above: a twentieth of every start-up, for the scans alone (issue 49)
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    cert = x509.load_der_x509_certificate(der)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = tuple(san.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        names = ()
    if not names:
        names = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME))
    issuer_names = tuple(
        str(a.value)
        for oid in (NameOID.ORGANIZATION_NAME, NameOID.COMMON_NAME)
        for a in cert.issuer.get_attributes_for_oid(oid)
    )
    return ServedCertificate(
        not_before=cert.not_valid_before_utc, not_after=cert.not_valid_after_utc,
        names=names, issuer_names=issuer_names,
    )


def _name_matches(pattern: str, host: str) -> bool:
    """RFC 6125: exact, or a wildcard that is the whole left-most label and stands for one label."""
    pattern = pattern.lower().rstrip(".")
    if pattern.startswith("*."):
        head, _, rest = host.partition(".")
        return bool(head) and rest == pattern[2:]
    return pattern == host


# -- beyond the spec: the caller's own domain ----------------------------------------------------


def _provider_certificate(services: Services, workspace: Workspace, host: str) -> Certificate | None:
    """The latest certificate of the caller's domain ``host``, when it has an expiry to compare."""
    domain = services.store.domains.by_apex(workspace.id, [host]).get(host)
    if domain is None:
        return None
    certificate = services.store.certificates.latest(workspace.id, domain.id)
    return None if certificate is None or certificate.not_after is None else certificate


def _with_provider(details: ScanDetails, certificate: Certificate, served: ServedCertificate | None) -> ScanDetails:
    assert certificate.not_after is not None  # _provider_certificate returns only those
    expected = certificate.not_after.astimezone(dt.UTC).replace(microsecond=0)
    matches = None
    if served is not None:
        same_expiry = served.not_after.replace(microsecond=0) == expected
        issuer = certificate.issuer.strip().lower()
        same_issuer = (
            not issuer or certificate.issuer == DEFAULT_ISSUER
            or any(issuer in name.lower() for name in served.issuer_names)
        )
        matches = same_expiry and same_issuer
    return attrs.evolve(details, served_matches_provider=matches, provider_not_after=certificate.not_after)
