"""One answer to "why is my certificate not active?": ``GET /v1/domains/:id/diagnosis``.

The report puts side by side what the zone's own nameservers publish (core/authority.py) and what
each configured resolver answers, then names each problem found with a code, a severity, a
sentence for a DNS administrator and the exact fix. It only reads: DNS, the stored certificate
state (as of its last refresh) and, for an active certificate, the certificate the host serves.

Findings, errors first:

| code | severity | when |
|---|---|---|
| `delegation_missing`, `ownership_missing` | error | the record is not published (at the zone's servers when known) |
| `delegation_wrong`, `ownership_wrong` | error | published with another value |
| `delegation_target_zone_appended` | error | the CNAME target got the zone appended (no trailing dot) |
| `delegation_blocked` | error | TXT or address records sit at the CNAME's name |
| `zone_appended_twice` | error | the record is at ``<name>.<zone>`` (the DNS host appended the zone) |
| `record_at_parent` | error | the record is at the zone's own ``_acme-challenge``/``_service-verify`` name |
| `ownership_other_workspace` | error | the TXT holds another account's token |
| `value_quoted` | warning | the TXT value carries literal quotes |
| `not_yet_visible` | warning | published, but a resolver still answers otherwise (cached) |
| `dnssec_failure` | error | a resolver answers SERVFAIL where the zone answers |
| `lookup_failed` | warning | a resolver did not answer (a record, or a step of the walk to the zone) |
| `caa_forbids` | error | CAA forbids the provider's certificate authorities |
| `renewal_at_risk` | error | an active or renewing certificate whose CNAME no longer points at the target |
| `renewal_unchecked` | warning | the same certificate, but no DNS server answered for its CNAME: not known |
| `provider_error`, `provider_pending` | error, info | the provider's own view |
| `served_mismatch` | warning | the host serves a certificate other than the provider's |
| `authority_unknown` | info | the zone's nameservers could not be found or did not answer; resolvers only |
| `all_good` | info | nothing to fix |
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from typing import TYPE_CHECKING, Literal

import attrs
import pycares
from aiodns import error as dns_error

from core import site_scan
from core.authority import Walk, Zone
from core.certificates import caa
from core.dns import Lookup
from core.domains import OWNERSHIP_VALUE_PREFIX, delegation_record, load, ownership_record
from core.errors import ApiError
from store.records import Certificate, DomainRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

Severity = Literal["error", "warning", "info"]
_ORDER = {"error": 0, "warning": 1, "info": 2}
#: What c-ares says of a SERVFAIL answer; core/dns.py keeps those words as an ``error`` lookup's
#: detail. Only SERVFAIL is what a validating resolver answers for a DNSSEC failure: an unreachable
#: or refusing resolver is a lookup that failed, nothing more.
_SERVFAIL = pycares.errno.strerror(dns_error.ARES_ESERVFAIL)
#: Certificates that serve traffic and that the provider renews through the CNAME.
_SERVING = ("active", "renewing")


@attrs.frozen
class Finding:
    code: str
    severity: Severity
    message: str
    "What is wrong, in words a DNS administrator understands."
    fix: str | None = None
    "Exactly what to change."


@attrs.frozen
class Answer:
    source: str
    "``authoritative`` (the zone's own servers) or a resolver's address."
    outcome: str
    "found, nxdomain, nodata, timeout or error."
    values: list[str]
    ttl: int | None = None
    "How long a resolver may keep this answer, in seconds."
    detail: str | None = None


@attrs.frozen
class RecordReport:
    purpose: str
    "``delegation`` (the CNAME) or ``ownership`` (the TXT)."
    type: str
    name: str
    relative_name: str | None
    "The name relative to the zone, as most DNS panels ask for it."
    expected: str
    answers: list[Answer]


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


@attrs.frozen
class Diagnosis:
    domain_id: uuid.UUID
    apex: str
    checked_at: dt.datetime
    verdict: str
    "``ok``, ``waiting`` (only time is needed) or ``action_needed``."
    summary: str
    zone: str | None
    nameservers: list[str]
    records: list[RecordReport]
    findings: list[Finding]
    provider: ProviderView | None = None


@attrs.frozen
class _Seen:
    """What one record looks like from everywhere it was asked."""

    name: str
    rtype: str
    expected: str
    authoritative: Lookup | None
    resolvers: list[tuple[str, Lookup]]

    def best(self) -> Lookup | None:
        """The truth as published: the zone's answer, else the first resolver that answered."""
        if self.authoritative is not None:
            return self.authoritative
        answered = [lookup for _, lookup in self.resolvers if lookup.outcome not in ("timeout", "error")]
        return answered[0] if answered else None


async def diagnose(services: Services, *, workspace: Workspace, domain_id: uuid.UUID) -> Diagnosis:
    row = load(services, workspace, domain_id)
    cname, txt = delegation_record(row), ownership_record(row)
    authority = services.authority
    walk = await authority.walk(row.apex)
    zone = walk.zone
    # The records, their usual misplacements, and what sits beside the CNAME.
    extra: list[tuple[str, str]] = [(cname.host, "TXT"), (cname.host, "A"), (cname.host, "AAAA")]
    if zone is not None:
        extra += [(f"{cname.host}.{zone.name}", "CNAME"), (f"{txt.host}.{zone.name}", "TXT")]
        if zone.name != row.apex:
            extra += [(f"_acme-challenge.{zone.name}", "CNAME"), (f"_service-verify.{zone.name}", "TXT")]
    queries = [(cname.host, "CNAME"), (txt.host, "TXT"), *extra]
    published = await authority.ask(zone, queries) if zone is not None and zone.servers else None
    at_zone = dict(zip(queries, published[1])) if published else {}
    resolvers = authority.each_resolver()
    answers = await asyncio.gather(*(checker.lookup_many(queries) for _, checker in resolvers))
    by_resolver = [(label, dict(zip(queries, found))) for (label, _), found in zip(resolvers, answers)]
    source = at_zone if at_zone else by_resolver[0][1]

    def seen(name: str, rtype: str, expected: str) -> _Seen:
        return _Seen(name, rtype, expected, at_zone.get((name, rtype)),
                     [(label, found[(name, rtype)]) for label, found in by_resolver])

    delegation, ownership = seen(cname.host, "CNAME", cname.value), seen(txt.host, "TXT", txt.value)
    certificate = services.store.certificates.latest(workspace.id, row.id)
    findings: list[Finding] = []
    if not at_zone:
        _authority_findings(findings, row.apex, walk)
    delegation_ok = _delegation_findings(findings, delegation, source, zone)
    ownership_ok = _ownership_findings(services, findings, ownership, source, zone, workspace)
    for record_seen in (delegation, ownership):
        _visibility_findings(findings, record_seen, zone)
    verdict_caa = await caa.preflight(services.dns, row.apex, services.config.provider.caa_issuers)
    if not verdict_caa.allowed:
        findings.append(Finding("caa_forbids", "error", verdict_caa.message or "CAA forbids issuance.",
                                fix=verdict_caa.message))
    provider = _provider_findings(findings, row, certificate, delegation_ok, delegation)
    if row.cert_status == "active" and certificate is not None:
        await _served_findings(services, findings, row, workspace)
    if not any(f.severity in ("error", "warning") for f in findings):
        done = delegation_ok and ownership_ok
        findings.append(Finding("all_good", "info", "Both records are published and visible; nothing to fix." if done
                                else "Nothing is wrong that a check could find."))
    findings.sort(key=lambda f: _ORDER[f.severity])
    return Diagnosis(
        domain_id=row.id, apex=row.apex, checked_at=services.clock.now(),
        verdict=_verdict(findings), summary=_summary(findings),
        zone=zone.name if zone else None, nameservers=list(zone.nameservers) if zone else [],
        records=[_report("delegation", delegation, zone), _report("ownership", ownership, zone)],
        findings=findings, provider=provider,
    )


def _authority_findings(findings: list[Finding], apex: str, walk: Walk) -> None:
    """Why the zone's own servers were not asked: a step of the walk unanswered, none found, or
    none answering. The first is a warning: the report then leans on the resolvers alone."""
    for step in walk.unanswered:
        said = f", {step.detail}" if step.outcome == "error" and step.detail else ""
        findings.append(Finding(
            "lookup_failed", "warning",
            f"The resolvers did not answer {step.rtype} at {step.name} ({step.outcome}{said}) while the zone's own "
            f"nameservers were being looked for, so the walk to the zone stopped there.",
            fix=f"Try again in a minute; if it persists, check that the resolvers can resolve {step.rtype} at {step.name}.",
        ))
    if walk.zone is None and not walk.unanswered:
        why = f"No NS records were found at or above {apex}, so the zone's own nameservers are not known"
    elif walk.zone is None:
        why = "The zone's own nameservers could not be found"
    elif not walk.zone.servers:
        why = f"The addresses of the zone's nameservers ({', '.join(walk.zone.nameservers)}) could not be found"
    else:
        why = f"The zone's own nameservers ({', '.join(walk.zone.nameservers)}) did not answer"
    findings.append(Finding("authority_unknown", "info", f"{why}; the answers below are the resolvers' only."))


def _same(a: str, b: str) -> bool:
    return a.rstrip(".").lower() == b.rstrip(".").lower()


def _txt_value(value: str) -> str:
    """A TXT value as verification compares it (one layer of quotes tolerated)."""
    return value.strip().strip('"').lower()


def _delegation_findings(findings: list[Finding], record: _Seen, source: dict, zone: Zone | None) -> bool | None:
    """Findings about the CNAME; whether it is right where it is published, None when no server
    answered (not known: never taken for "wrong")."""
    lookup = record.best()
    fix = f"Publish a CNAME record named {record.name} with the value {record.expected}."
    if lookup is None:
        return None  # nobody answered: the lookup_failed findings say so, nothing is known to be missing
    if lookup.outcome == "found":
        target = lookup.values[0]
        if any(_same(v, record.expected) for v in lookup.values):
            return True
        if zone is not None and _same(target, f"{record.expected}.{zone.name}"):
            findings.append(Finding(
                "delegation_target_zone_appended", "error",
                f"The CNAME at {record.name} points to {target}: the DNS host appended the zone {zone.name} to the "
                "value, which happens when the value is entered without a final dot.",
                fix=f"Set the value to {record.expected}. (with a final dot), or as the panel shows it, exactly {record.expected}.",
            ))
            return False
        findings.append(Finding("delegation_wrong", "error", f"The CNAME at {record.name} points to {target}, not to {record.expected}.",
                                fix=f"Change the CNAME's value to {record.expected}."))
        return False
    blockers = [source.get((record.name, t)) for t in ("TXT", "A", "AAAA")]
    blocking = [b for b in blockers if b is not None and b.outcome == "found"]
    if blocking:
        kinds = " and ".join(sorted({b.rtype for b in blocking}))
        findings.append(Finding(
            "delegation_blocked", "error",
            f"{record.name} has {kinds} records, and a CNAME cannot share its name with other records.",
            fix=f"Delete the {kinds} records at {record.name}, then {fix[0].lower()}{fix[1:]}",
        ))
        return False
    if not _misplaced(findings, record, source, zone, "CNAME", lambda v: _same(v, record.expected)):
        findings.append(Finding("delegation_missing", "error", f"No CNAME record is published at {record.name}.", fix=fix))
    return False


def _ownership_findings(services: Services, findings: list[Finding], record: _Seen, source: dict, zone: Zone | None,
                        workspace: Workspace) -> bool:
    lookup = record.best()
    expected = _txt_value(record.expected)
    fix = f"Publish a TXT record named {record.name} with the value {record.expected}."
    if lookup is None:
        return False
    if lookup.outcome == "found":
        if any(_txt_value(v) == expected for v in lookup.values):
            quoted = [v for v in lookup.values if _txt_value(v) == expected and v.strip() != record.expected]
            if quoted:
                findings.append(Finding(
                    "value_quoted", "warning",
                    f"The TXT record at {record.name} holds {quoted[0]}, with literal quote characters; it is accepted, "
                    "but many tools would not match it.",
                    fix=f"Set the TXT record at {record.name} to {record.expected}, without quote characters.",
                ))
            return True
        tokens = [_txt_value(v)[len(OWNERSHIP_VALUE_PREFIX):] for v in lookup.values
                  if _txt_value(v).startswith(OWNERSHIP_VALUE_PREFIX)]
        others = [t for t in tokens if services.store.accounts.workspace_with_token(t) not in (None, workspace.id)]
        if others:
            findings.append(Finding(
                "ownership_other_workspace", "error",
                f"The TXT record at {record.name} holds the ownership token of another account on this service, "
                "not of this workspace (was the domain added from another account first?).",
                fix=f"Replace the value of the TXT record at {record.name} with {record.expected}.",
            ))
            return False
        quoted_wrong = [v for v in lookup.values if _txt_value(v.replace('\\"', "").replace('"', "")) == expected]
        if quoted_wrong:
            findings.append(Finding("value_quoted", "error",
                                    f"The TXT record at {record.name} holds {quoted_wrong[0]}: the quotes make it another value.",
                                    fix=f"Set the TXT record at {record.name} to {record.expected}, without quote characters."))
            return False
        shown = ", ".join(lookup.values[:3])
        findings.append(Finding("ownership_wrong", "error", f"The TXT records at {record.name} ({shown}) do not hold {record.expected}.",
                                fix=f"Add a TXT record at {record.name} with the value {record.expected} (other TXT records may stay)."))
        return False
    if not _misplaced(findings, record, source, zone, "TXT", lambda v: _txt_value(v) == expected):
        findings.append(Finding("ownership_missing", "error", f"No TXT record is published at {record.name}.", fix=fix))
    return False


def _misplaced(findings: list[Finding], record: _Seen, source: dict, zone: Zone | None, rtype: str, right) -> bool:
    """A missing record found where DNS hosts commonly put it by mistake."""
    if zone is None:
        return False
    label = record.name.split(".", 1)[0]
    doubled = source.get((f"{record.name}.{zone.name}", rtype))
    if doubled is not None and doubled.outcome == "found":
        findings.append(Finding(
            "zone_appended_twice", "error",
            f"The {rtype} record was published as {record.name}.{zone.name}: the DNS host appended the zone "
            f"{zone.name} to a name that already ended with it.",
            fix=f"Delete the {rtype} record {record.name}.{zone.name} and create it as {record.name}: in the panel, "
            f"with the name {_relative(record.name, zone)} (relative to the zone).",
        ))
        return True
    parent = source.get((f"{label}.{zone.name}", rtype))
    if record.name != f"{label}.{zone.name}" and parent is not None and parent.outcome == "found" and any(map(right, parent.values)):
        findings.append(Finding(
            "record_at_parent", "error",
            f"The {rtype} record was published at {label}.{zone.name}, the zone's own name, instead of at {record.name}.",
            fix=f"Move the {rtype} record from {label}.{zone.name} to {record.name} (in the panel: {_relative(record.name, zone)}).",
        ))
        return True
    return False


def _visibility_findings(findings: list[Finding], record: _Seen, zone: Zone | None) -> None:
    """Published at the zone, yet answered otherwise by a resolver: a cache, or DNSSEC."""
    published = record.authoritative
    for label, lookup in record.resolvers:
        if _servfail(lookup) and published is not None and published.outcome in ("found", "nxdomain", "nodata"):
            findings.append(Finding(
                "dnssec_failure", "error",
                f"The resolver {label} answers SERVFAIL for {record.rtype} at {record.name} although the zone's own "
                "servers answer it: this is what a DNSSEC validation failure looks like (expired signatures, or a "
                "DS record at the parent that matches no key).",
                fix=f"Check the DNSSEC of the zone {zone.name if zone else record.name} (for example with dnsviz.net): "
                "re-sign the zone, or remove the DS record at the registrar if DNSSEC is not meant to be on; "
                f"then check {record.name} again.",
            ))
        elif lookup.outcome in ("timeout", "error"):
            said = f", {lookup.detail}" if lookup.outcome == "error" and lookup.detail else ""
            findings.append(Finding("lookup_failed", "warning",
                                    f"The resolver {label} did not answer {record.rtype} at {record.name} ({lookup.outcome}{said}).",
                                    fix=f"Try again in a minute; if it persists, check the resolver {label}."))
        elif published is not None and published.outcome == "found" and set(lookup.values) != set(published.values):
            if lookup.outcome == "found":
                wait = f"it may keep that answer for up to {lookup.ttl} s more" if lookup.ttl is not None else "it keeps it until its TTL runs out"
                shown = f"still answers {', '.join(lookup.values[:2])}; {wait}"
                until = f"up to {lookup.ttl} s" if lookup.ttl is not None else "until its TTL runs out"
            else:
                shown = "does not see it yet (a negative answer is cached for up to the zone's SOA minimum TTL)"
                until = "up to the zone's SOA minimum TTL"
            findings.append(Finding(
                "not_yet_visible", "warning",
                f"The {record.rtype} record at {record.name} is published, but the resolver {label} {shown}.",
                fix=f"Nothing to change at {record.name}: wait {until} for the resolver {label} to forget its cached "
                "answer, then check again.",
            ))


def _servfail(lookup: Lookup) -> bool:
    return lookup.outcome == "error" and lookup.detail == _SERVFAIL


def _provider_findings(findings: list[Finding], row: DomainRow, certificate: Certificate | None,
                       delegation_ok: bool | None, delegation: _Seen) -> ProviderView | None:
    if certificate is None:
        return None
    if row.cert_status in _SERVING and certificate.not_after is not None and not delegation_ok:
        _renewal_finding(findings, row, certificate.not_after, delegation_ok, delegation)
    if certificate.status == "error":
        findings.append(Finding("provider_error", "error",
                                f"The edge provider could not issue the certificate: {certificate.last_error or 'no reason given'}",
                                fix="Fix what the findings above name, then check again (POST /v1/domains/:id/recheck)."))
    elif certificate.status == "pending":
        findings.append(Finding(
            "provider_pending", "info",
            f"The edge provider is working on the certificate (hostname {certificate.provider_hostname_status or 'pending'}, "
            f"certificate {certificate.provider_status or 'pending'}).",
        ))
    return ProviderView(
        certificate_status=certificate.status, hostname_status=certificate.provider_hostname_status,
        ssl_status=certificate.provider_status, last_error=certificate.last_error,
        checked_at=certificate.last_checked_at, not_after=certificate.not_after,
    )


def _renewal_finding(findings: list[Finding], row: DomainRow, not_after: dt.datetime, delegation_ok: bool | None,
                     delegation: _Seen) -> None:
    """A serving certificate is renewed by the provider through the CNAME: one that no longer
    points at the target means it will expire. When no server answered, that is not known, and
    said so, rather than raise an alarm that may be false."""
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
    findings.append(Finding(
        "renewal_at_risk", "error",
        f"The certificate {state} until {not_after:%Y-%m-%d}, but {now}: the provider cannot renew it, "
        "and it will expire.",
        fix=f"Restore the CNAME record {host} with the value {target}.",
    ))


async def _served_findings(services: Services, findings: list[Finding], row: DomainRow, workspace: Workspace) -> None:
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


def _relative(name: str, zone: Zone | None) -> str | None:
    if zone is None:
        return None
    if _same(name, zone.name):
        return "@"
    suffix = "." + zone.name
    return name[: -len(suffix)] if name.lower().endswith(suffix) else None


def _report(purpose: str, record: _Seen, zone: Zone | None) -> RecordReport:
    answers = []
    if record.authoritative is not None:
        answers.append(_answer("authoritative", record.authoritative))
    answers += [_answer(label, lookup) for label, lookup in record.resolvers]
    return RecordReport(purpose=purpose, type=record.rtype, name=record.name, relative_name=_relative(record.name, zone),
                        expected=record.expected, answers=answers)


def _answer(source: str, lookup: Lookup) -> Answer:
    return Answer(source=source, outcome=lookup.outcome, values=list(lookup.values), ttl=lookup.ttl,
                  detail=lookup.detail or None)


def _verdict(findings: list[Finding]) -> str:
    severities = {f.severity for f in findings}
    if "error" in severities:
        return "action_needed"
    if "warning" in severities or any(f.code == "provider_pending" for f in findings):
        return "waiting"
    return "ok"


def _summary(findings: list[Finding]) -> str:
    first = findings[0]
    if first.severity == "info":
        return first.message
    more = sum(1 for f in findings if f.severity != "info") - 1
    return first.message + (f" ({more} more finding{'s' if more != 1 else ''} below.)" if more else "")
