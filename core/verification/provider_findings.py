"""The diagnosis's second question: what does the issuer (the edge provider, or the CA) say, does the host serve its
certificate, and will the next renewal work?"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import attrs

from core.domains.records import delegation_record
from core.edge.words import EDGE, ProviderWords, hostname_words, ssl_words
from core.errors import ApiError
from core.outbound import site_scan
from core.verification.record_findings import Finding, Seen
from core.wire import INTERNAL
from store.records import Certificate, DomainRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

#: The API call that checks again; the portal names its "Check now" button instead.
RECHECK = "check again (POST /v1/domains/:id/recheck)"

#: Certificates that serve traffic and that the provider renews through the CNAME.
_SERVING = ("active", "renewing")


@attrs.frozen
class ProviderView:
    certificate_status: str
    hostname_status: str | None
    ssl_status: str | None
    last_error: str | None
    checked_at: dt.datetime | None
    not_after: dt.datetime | None
    words: ProviderWords = attrs.field(default=EDGE, metadata={INTERNAL: True})
    "Who issues, named in the sentences and in the heading of the portal's section."

    def in_words(self) -> list[str]:
        """The provider's view as sentences for the portal's pages. An edge provider's own status
        words are kept in them so that they can be matched with its dashboard or support; the ACME
        provider's are the service's own (core/acme/reported.py), said in words alone."""
        until = f", until {self.not_after:%Y-%m-%d}" if self.not_after else ""
        who, whose = self.words.Issuer, self.words.Issuers
        lines = [{
            "active": f"{whose} certificate is active{until}.",
            "pending": f"{who} is still working on the certificate.",
            "error": f"{who} could not issue the certificate.",
        }.get(self.certificate_status, f"{whose} certificate is {self.certificate_status}.")]
        if self.hostname_status and not self.words.acme:
            lines.append(f"It reports the hostname as {hostname_words(self.hostname_status)} "
                         f"(status {self.hostname_status}).")
        if self.ssl_status and self.words.acme:
            if self.ssl_status != "active":  # an issued one is said by the first line
                lines.append(f"Its order is {ssl_words(self.ssl_status)}.")
        elif self.ssl_status:
            lines.append(f"It reports the certificate as {ssl_words(self.ssl_status)} (ssl.status {self.ssl_status}).")
        if self.last_error:
            lines.append(f"What it said: {self.last_error}")
        if self.checked_at:
            lines.append(f"Last checked with {self.words.issuer if self.words.acme else 'the provider'} "
                         f"{self.checked_at:%Y-%m-%d %H:%M:%S} UTC.")
        return lines


def provider_findings(findings: list[Finding], row: DomainRow, certificate: Certificate | None,
                       delegation_ok: bool | None, delegation: Seen, *, fix: str | None = None,
                       waiting: bool = False, words: ProviderWords = EDGE) -> ProviderView | None:
    """``fix``: what to do about the provider's refusal, when the provider says (ACME: by what the CA
    met); ``waiting``: the provider tries again by itself (ACME: after a resolver's cache); ``words``:
    who issues (core/edge/words.py): with ACME the service itself is the client of a CA, which the
    sentences name where they would name an edge provider."""
    acme = words.acme
    if certificate is None:
        return None
    if row.cert_status in _SERVING and certificate.not_after is not None and not delegation_ok:
        _renewal_finding(findings, row, certificate.not_after, delegation_ok, delegation, words=words)
    if certificate.status == "error":
        # Errors are listed first, in the order found: those found so far are the ones above this one.
        above = any(f.severity == "error" for f in findings)
        waiting = waiting and not above
        if above:
            fix = f"Fix what the findings above name, then {RECHECK}."
        elif fix is None:
            fix = f"Nothing the checks can see is wrong now: {RECHECK} to have {words.issuer if acme else 'the provider'} validate again."
        findings.append(Finding("provider_error", "warning" if waiting else "error",
                                f"{words.Issuer} could not issue the certificate: {certificate.last_error or 'no reason given'}",
                                fix=fix))
    elif certificate.status == "pending":
        findings.append(Finding(
            "provider_pending", "info",
            f"{words.Issuer} is working on the certificate ({_state_in_words(certificate, words)}).",
        ))
    return ProviderView(
        certificate_status=certificate.status, hostname_status=certificate.provider_hostname_status,
        ssl_status=certificate.provider_status, last_error=certificate.last_error,
        checked_at=certificate.last_checked_at, not_after=certificate.not_after, words=words,
    )


def _state_in_words(certificate: Certificate, words: ProviderWords) -> str:
    """The provider's states as people read them (the raw values are the Certificate's fields)."""
    said = f"the certificate {ssl_words(certificate.provider_status or 'pending_validation')}"
    if words.acme:  # the ACME provider's hostname status only repeats whether it issued
        return said
    return f"the hostname {hostname_words(certificate.provider_hostname_status or 'pending')}, {said}"


def _renewal_finding(findings: list[Finding], row: DomainRow, not_after: dt.datetime, delegation_ok: bool | None,
                     delegation: Seen, *, words: ProviderWords) -> None:
    """A serving certificate is renewed through the CNAME (by the provider, or by the service at
    the CA, which validates DNS-01 through it): one that no longer points at the target means it
    will expire. When no server answered, that is not known, and said so, rather than raise an
    alarm that may be false."""
    host, target = delegation_record(row).host, row.delegation_target
    state = "is active" if row.cert_status == "active" else "is being renewed and the current one serves"
    if delegation_ok is None:
        findings.append(Finding(
            "renewal_unchecked", "warning",
            f"The certificate {state} until {not_after:%Y-%m-%d}; whether the CNAME at {host} still points at "
            f"{target}, which its renewal needs, could not be checked: no DNS server answered for it.",
            fix=f"Check again in a minute; renewal needs the CNAME {host} with the value {target}.",
        ))
        return
    lookup = delegation.best()
    if lookup is not None and lookup.outcome == "found":
        now = f"the CNAME at {host} now points at {lookup.values[0]} instead of {target}"
    else:
        now = f"there is no longer a CNAME at {host} pointing at {target}"
    cannot = (f"{words.issuer} cannot validate its renewal (DNS-01 follows that CNAME)" if words.acme
              else "the provider cannot renew it")
    seen_since = ""
    if row.drift_since is not None and any(p.code in ("delegation_missing", "delegation_wrong") for p in row.drift):
        seen_since = f" Checks have found this since {row.drift_since:%Y-%m-%d %H:%M} UTC."
    findings.append(Finding(
        "renewal_at_risk", "error",
        f"The certificate {state} until {not_after:%Y-%m-%d}, but {now}: {cannot}, and it will expire.{seen_since}",
        fix=f"Restore the CNAME record {host} with the value {target}.",
    ))


async def served_findings(services: Services, findings: list[Finding], row: DomainRow, workspace: Workspace,
                          words: ProviderWords = EDGE) -> None:
    try:
        scan = await site_scan.scan_https(services, site_scan.ScanRequest(url_or_domain=row.apex), workspace)
    except ApiError:  # e.g. the host resolves to an address the service may not reach: not checked
        return
    if scan.details.served_matches_provider is False:
        issued = f"{words.issuer} issued for it" if words.acme else "the edge provider issued"
        findings.append(Finding(
            "served_mismatch", "warning",
            f"{row.apex} serves a certificate other than the one {issued} "
            f"({scan.details.reason or 'it does not match'}): traffic does not reach {words.server} yet.",
            fix=f"Point the hostname's traffic at {words.server} (the CNAME or addresses the SaaS platform gives you).",
        ))
