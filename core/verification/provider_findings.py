"""The diagnosis's second question: what does the edge provider say, does the host serve its
certificate, and will the next renewal work?"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import attrs

from core.domains.records import delegation_record
from core.errors import ApiError
from core.outbound import site_scan
from core.verification.record_findings import Finding, Seen
from store.records import Certificate, DomainRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

#: The API call that checks again; the portal names its "Check now" button instead.
RECHECK = "check again (POST /v1/domains/:id/recheck)"

#: Certificates that serve traffic and that the provider renews through the CNAME.
_SERVING = ("active", "renewing")


#: The provider's hostname ``status`` and ``ssl.status`` values, in words for the portal's pages
#: (core/certificates/states.py decides what they mean for our states; these only explain them).
_HOSTNAME_WORDS = {
    "pending": "not yet confirmed",
    "active": "confirmed: the provider serves it",
    "active_redeploying": "confirmed, its settings being redeployed",
    "moved": "no longer pointing at the provider",
    "deleted": "deleted",
    "pending_deletion": "being deleted",
    "blocked": "blocked",
    "test_blocked": "blocked",
    "test_failed": "having failed the provider's checks",
}
_SSL_WORDS = {
    "initializing": "being set up",
    "pending_validation": "waiting for its DNS validation (the CNAME record)",
    "pending_issuance": "validated, being issued by the certificate authority",
    "pending_deployment": "issued, being deployed to the provider's servers",
    "active": "issued and served",
    "validation_timed_out": "timed out: the validation records were not found in time",
    "issuance_timed_out": "timed out: the certificate authority did not issue it in time",
    "deployment_timed_out": "timed out: it could not be deployed in time",
    "expired": "expired",
    "deleted": "deleted",
    "pending_deletion": "being deleted",
    "deactivating": "being deactivated",
    "inactive": "inactive",
}


@attrs.frozen
class ProviderView:
    certificate_status: str
    hostname_status: str | None
    ssl_status: str | None
    last_error: str | None
    checked_at: dt.datetime | None
    not_after: dt.datetime | None

    def in_words(self) -> list[str]:
        """The provider's view as sentences for the portal's pages, its own status words kept in
        them so that they can be matched with the provider's dashboard or support."""
        until = f", until {self.not_after:%Y-%m-%d}" if self.not_after else ""
        lines = [{
            "active": f"The edge provider's certificate is active{until}.",
            "pending": "The edge provider is still working on the certificate.",
            "error": "The edge provider could not issue the certificate.",
        }.get(self.certificate_status, f"The edge provider's certificate is {self.certificate_status}.")]
        if self.hostname_status:
            words = _HOSTNAME_WORDS.get(self.hostname_status, "in a state the service does not know")
            lines.append(f"It reports the hostname as {words} (status {self.hostname_status}).")
        if self.ssl_status:
            words = _SSL_WORDS.get(self.ssl_status, "in a state the service does not know")
            lines.append(f"It reports the certificate as {words} (ssl.status {self.ssl_status}).")
        if self.last_error:
            lines.append(f"What it said: {self.last_error}")
        if self.checked_at:
            lines.append(f"Last checked with the provider {self.checked_at:%Y-%m-%d %H:%M:%S} UTC.")
        return lines


def provider_findings(findings: list[Finding], row: DomainRow, certificate: Certificate | None,
                       delegation_ok: bool | None, delegation: Seen, *, fix: str | None = None,
                       waiting: bool = False, acme: bool = False) -> ProviderView | None:
    """``fix``: what to do about the provider's refusal, when the provider says (ACME: by what the CA
    met); ``waiting``: the provider tries again by itself (ACME: after a resolver's cache); ``acme``: the
    service itself is the ACME client, so the words name the certificate authority where they would
    name an edge provider."""
    if certificate is None:
        return None
    if row.cert_status in _SERVING and certificate.not_after is not None and not delegation_ok:
        _renewal_finding(findings, row, certificate.not_after, delegation_ok, delegation, acme=acme)
    if certificate.status == "error":
        # Errors are listed first, in the order found: those found so far are the ones above this one.
        above = any(f.severity == "error" for f in findings)
        waiting = waiting and not above
        if above:
            fix = f"Fix what the findings above name, then {RECHECK}."
        elif fix is None:
            fix = f"Nothing the checks can see is wrong now: {RECHECK} to have the {'certificate authority' if acme else 'provider'} validate again."
        who = "The certificate authority" if acme else "The edge provider"
        findings.append(Finding("provider_error", "warning" if waiting else "error",
                                f"{who} could not issue the certificate: {certificate.last_error or 'no reason given'}",
                                fix=fix))
    elif certificate.status == "pending":
        findings.append(Finding(
            "provider_pending", "info",
            f"{'The certificate authority' if acme else 'The edge provider'} is working on the certificate (hostname {certificate.provider_hostname_status or 'pending'}, "
            f"certificate {certificate.provider_status or 'pending'}).",
        ))
    return ProviderView(
        certificate_status=certificate.status, hostname_status=certificate.provider_hostname_status,
        ssl_status=certificate.provider_status, last_error=certificate.last_error,
        checked_at=certificate.last_checked_at, not_after=certificate.not_after,
    )


def _renewal_finding(findings: list[Finding], row: DomainRow, not_after: dt.datetime, delegation_ok: bool | None,
                     delegation: Seen, *, acme: bool) -> None:
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
    cannot = ("the certificate authority cannot validate its renewal (DNS-01 follows that CNAME)" if acme
              else "the provider cannot renew it")
    findings.append(Finding(
        "renewal_at_risk", "error",
        f"The certificate {state} until {not_after:%Y-%m-%d}, but {now}: {cannot}, and it will expire.",
        fix=f"Restore the CNAME record {host} with the value {target}.",
    ))


async def served_findings(services: Services, findings: list[Finding], row: DomainRow, workspace: Workspace) -> None:
    try:
        scan = await site_scan.scan_https(services, site_scan.ScanRequest(url_or_domain=row.apex), workspace)
    except ApiError:  # e.g. the host resolves to an address the service may not reach: not checked
        return
    if scan.details.served_matches_provider is False:
        findings.append(Finding(
            "served_mismatch", "warning",
            f"{row.apex} serves a certificate other than the one the edge provider issued "
            f"({scan.details.reason or 'it does not match'}): traffic does not reach the provider yet.",
            fix="Point the hostname's traffic at the edge provider (the CNAME or addresses the SaaS platform gives you).",
        ))
