"""One answer to "why is my certificate not active?": ``GET /v1/domains/:id/diagnosis``.

The report puts side by side what the zone's own nameservers publish (core/dns/authority.py) and what
each configured resolver answers, then names each problem found with a code, a severity, a
sentence for a DNS administrator and the exact fix. It only reads: DNS, the stored certificate
state (as of its last refresh) and, for an active certificate, the certificate the host serves. The
one thing it keeps is what the walk found out about the zone's DNS host (core/verification/dns_host.py).

Findings, errors first:

| code | severity | when |
|---|---|---|
| `delegation_missing`, `ownership_missing` | error | the record is not published (at the zone's servers when known) |
| `delegation_wrong`, `ownership_wrong` | error | published with another value (for the CNAME: nor leading there through a chain) |
| `delegation_chain` | info | the CNAME leads to the target through other CNAMEs (it works: DNS-01 follows chains) |
| `delegation_loop` | error | the CNAME's chain leads back to a name on the way |
| `lame_delegation` | error | none of the zone's nameservers answers for it (each named, with its address and how it failed) |
| `partly_lame_delegation` | warning | some of the zone's nameservers do not answer for it |
| `delegation_target_zone_appended` | error | the CNAME target got the zone appended (no trailing dot) |
| `delegation_blocked` | error | TXT or address records sit at the CNAME's name |
| `zone_appended_twice` | error | the record is at ``<name>.<zone>`` (the DNS host appended the zone) |
| `record_at_parent` | error | the record is at the zone's own ``_acme-challenge``/``_service-verify`` name (not the zone's own domain's) |
| `ownership_split` | error | the TXT value is cut over two TXT records |
| `ownership_other_workspace` | error | the TXT holds another account's token |
| `value_quoted` | warning | the TXT value carries literal quotes |
| `still_cached` | warning | a resolver still serves a record the zone no longer has |
| `not_yet_visible` | warning | published, but a resolver still answers otherwise (cached); simulated DNS: not there yet |
| `dnssec_failure` | error | a resolver answers SERVFAIL, but answers with DNSSEC checking off (or the zone answers) |
| `lookup_failed` | warning | a resolver did not answer (a record, or a step of the walk to the zone) |
| `caa_forbids` | error | CAA forbids the provider's certificate authorities |
| `renewal_at_risk` | error | an active or renewing certificate whose CNAME no longer points at the target (said once: no `delegation_missing`/`_wrong` nor its drift beside it) |
| `renewal_unchecked` | warning | the same certificate, but no DNS server answered for its CNAME: not known |
| `drift_recorded` | error, or info once the record looks right again (or only a cache hides it) | a background check recorded drift (``validation.drift``) |
| `provider_error`, `provider_pending` | error (a warning while the provider retries by itself), info | the provider's own view |
| `ca_paused`, `orders_stopped`, `orders_waiting`, `delegation_zone_broken`, `delegation_zone_unreachable`, `renewal_explained` | | ACME only: core/verification/acme_findings.py |
| `served_mismatch` | warning | the host serves a certificate other than the provider's |
| `authority_unknown` | info | the zone's nameservers could not be found or did not answer; resolvers only |
| `one_click_ignored` | info | the zone's Domain Connect settings were ignored (too large, not https, a private address...) |
| `all_good` | info | nothing to fix |
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from typing import TYPE_CHECKING

import attrs

from core.clock import by_minute
from core.dns import caa
from core.dns.authority import Walk, Zone
from core.dns.chain import Chain, follow
from core.dns.delegation import Delegation
from core.dns.lookups import Lookup, Resolver
from core.dns.probe import negative_ttl
from core.domains import dns_hosts
from core.domains.operations import load
from core.domains.records import delegation_record, ownership_record
from core.edge.words import provider_words
from core.verification import dns_host
from core.verification.provider_findings import ProviderView, provider_findings, served_findings
from core.verification.record_findings import (
    Finding,
    Seen,
    authority_findings,
    claimed_tokens,
    delegation_findings,
    dnssec_findings,
    lame_findings,
    ownership_findings,
    relative_to_zone,
    same_name,
    simulated_not_yet,
    visibility_findings,
)
from store.records import Certificate, DnsHostSeen, DomainRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

_ORDER = {"error": 0, "warning": 1, "info": 2}


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


@attrs.frozen
class Diagnosis:
    domain_id: uuid.UUID
    apex: str
    checked_at: dt.datetime
    verdict: str
    "``ok``, ``waiting`` (only time is needed) or ``action_needed``."
    summary: str
    zone: str | None
    "The zone holding the records; for a lame delegation, the zone its parent delegated."
    nameservers: list[str]
    records: list[RecordReport]
    findings: list[Finding]
    provider: ProviderView | None = None
    dns_host_name: str | None = None
    "The zone's DNS host, when its nameservers are those of a host the service knows (core/domains/dns_hosts.py)."


@attrs.frozen
class _Stored:
    """What the diagnosis reads from the database, and the domain with its DNS host kept."""

    row: DomainRow
    certificate: Certificate | None
    zone_is_a_domain: bool
    "The zone's own apex is a domain of this workspace too: records at the zone's name are not misplaced."
    foreign: frozenset[str]
    "The ownership tokens in the TXT record that are another workspace's."


def _stored(services: Services, workspace: Workspace, row: DomainRow, found: DnsHostSeen | None, zone: Zone | None,
            tokens: list[str]) -> _Stored:
    """The diagnosis's one unit of work, after its lookups."""
    store = services.store
    zone_is_a_domain = zone is not None and zone.name != row.apex and bool(store.domains.by_apex(workspace.id, [zone.name]))
    return _Stored(
        row=dns_host.keep(services, row, found),
        certificate=store.certificates.latest(workspace.id, row.id),
        zone_is_a_domain=zone_is_a_domain,
        foreign=frozenset(t for t in tokens if t != workspace.ownership_token
                          and store.accounts.workspace_with_token(t) not in (None, workspace.id)),
    )


@attrs.frozen
class _Asked:
    """Everything DNS answered the diagnosis, asked concurrently where nothing depends on another answer."""

    walk: Walk
    delegation: Delegation | None
    host: DnsHostSeen | None
    at_zone: dict[tuple[str, str], Lookup]
    "The zone's own answers, by (name, type), when its servers answered."
    by_resolver: list[tuple[str, dict[tuple[str, str], Lookup]]]
    caa: caa.CaaVerdict


async def _ask(services: Services, row: DomainRow) -> _Asked:
    """The walk, the resolvers and CAA first; then, from the zone found, its servers' answers, its
    nameservers' health and its DNS host."""
    cname, txt = delegation_record(row), ownership_record(row)
    authority = services.authority
    # The records, and what sits beside the CNAME: asked of the zone's servers and every resolver.
    queries = [(cname.host, "CNAME"), (txt.host, "TXT"), (cname.host, "TXT"), (cname.host, "A"), (cname.host, "AAAA")]
    resolvers = authority.each_resolver()
    walk, verdict_caa, answers = await asyncio.gather(
        authority.walk(row.apex), caa.preflight(services.dns, row.apex, await services.provider.caa_issuers()),
        asyncio.gather(*(checker.lookup_many(queries) for _, checker in resolvers)))
    zone = walk.zone
    # Their usual misplacements: asked of the zone's own servers only. Through a resolver, a "no"
    # would stay cached for the zone's own names, which a domain added next may need.
    misplaced: list[tuple[str, str]] = []
    if zone is not None:
        misplaced += [(f"{cname.host}.{zone.name}", "CNAME"), (f"{txt.host}.{zone.name}", "TXT")]
        if zone.name != row.apex:
            misplaced += [(f"_acme-challenge.{zone.name}", "CNAME"), (f"_service-verify.{zone.name}", "TXT")]
    asked_zone = authority.ask(zone, queries + misplaced) if zone is not None and zone.servers else _nothing()
    host, delegation, published = await asyncio.gather(
        dns_host.seen(services, row, walk), authority.delegation(walk, row.apex), asked_zone)
    return _Asked(
        walk=walk, delegation=delegation, host=host,
        at_zone=dict(zip(queries + misplaced, published[1])) if published else {},
        by_resolver=[(label, dict(zip(queries, found))) for (label, _), found in zip(resolvers, answers)],
        caa=verdict_caa,
    )


async def _nothing() -> None:
    return None


async def diagnose(services: Services, *, workspace: Workspace, domain_id: uuid.UUID) -> Diagnosis:
    row = await services.store.run(load, services, workspace, domain_id)
    cname, txt = delegation_record(row), ownership_record(row)
    asked = await _ask(services, row)
    walk, zone, delegation, at_zone, by_resolver = asked.walk, asked.walk.zone, asked.delegation, asked.at_zone, asked.by_resolver
    source = at_zone if at_zone else by_resolver[0][1]

    def seen(name: str, rtype: str, expected: str) -> Seen:
        return Seen(name, rtype, expected, at_zone.get((name, rtype)),
                     [(label, found[(name, rtype)]) for label, found in by_resolver])

    delegation_seen, ownership = seen(cname.host, "CNAME", cname.value), seen(txt.host, "TXT", txt.value)
    followed = await _chain(services, delegation_seen, zone)
    stored = await services.store.run(_stored, services, workspace, row, asked.host, zone, claimed_tokens(ownership))
    host_seen, certificate, zone_is_a_domain = stored.row, stored.certificate, stored.zone_is_a_domain
    findings: list[Finding] = []
    dnssec_findings(findings, walk)
    if delegation is not None and delegation.checks:
        lame_findings(findings, delegation, services.dns.timeout)
    if not at_zone:
        authority_findings(findings, row.apex, walk)
    delegation_ok = delegation_findings(findings, delegation_seen, source, zone, zone_is_a_domain=zone_is_a_domain,
                                        chain=followed)
    ownership_ok = ownership_findings(findings, ownership, source, zone, stored.foreign,
                                      zone_is_a_domain=zone_is_a_domain)
    for record_seen in (delegation_seen, ownership):
        visible_by = await _visible_by(services, record_seen, dict(services.authority.each_resolver()))
        visibility_findings(findings, record_seen, zone, visible_by=visible_by)
    simulated_not_yet(findings, row, services.config, services.clock.now())
    verdict_caa = asked.caa
    if verdict_caa.dnssec and not any(f.code == "dnssec_failure" for f in findings):
        findings.append(Finding("dnssec_failure", "error", verdict_caa.message or "", fix=verdict_caa.message))
    elif not verdict_caa.allowed and not verdict_caa.dnssec:
        findings.append(Finding("caa_forbids", "error", verdict_caa.message or "CAA forbids issuance.",
                                fix=verdict_caa.message))
    if any(f.code == "lame_delegation" for f in findings):  # it explains every unanswered lookup
        findings = [f for f in findings if f.code not in ("lookup_failed", "authority_unknown")]
    resolvers_see = bool(delegation_ok) and all(_leads_to(lookup, cname.value, followed)
                                               for _, lookup in delegation_seen.resolvers)
    # A serving certificate whose CNAME is gone or wrong: one problem, said once, by renewal_at_risk
    # (provider_findings), which names what the CNAME is now, the expiry, and since when checks see it.
    at_risk = row.cert_status in _SERVING and certificate is not None and certificate.not_after is not None \
        and delegation_ok is False
    if at_risk:
        findings[:] = [f for f in findings if f.code not in CNAME_DRIFT]
    drift_findings(findings, row, resolvers_see=resolvers_see, caa_allows=verdict_caa.allowed, cname_said=at_risk)
    if host_seen.dns_host is not None and host_seen.dns_host.problem:
        findings.append(Finding("one_click_ignored", "info", host_seen.dns_host.problem
                                + " So one-click set-up is not offered; the records can be published by hand."))
    # Here, not above: the ACME client's findings (its problems, dnspython's codes, the delegation
    # zone's view) were imported by every start-up, before the first answer, which needs none (issue 49).
    from core.verification.acme_findings import acme_view

    acme = await acme_view(services, row, certificate)
    words = provider_words(services.config.provider)
    findings += acme.findings if acme is not None else []
    provider = provider_findings(findings, row, certificate, delegation_ok, delegation_seen,
                                 fix=acme.fix if acme is not None else None,
                                 waiting=acme is not None and acme.waiting,
                                 words=words)
    if row.cert_status == "active" and certificate is not None:
        await served_findings(services, findings, row, workspace, words)
    if not any(f.severity in ("error", "warning") for f in findings):
        done = delegation_ok and ownership_ok
        findings.append(Finding("all_good", "info", "Both records are published and visible; nothing to fix." if done
                                else "Nothing is wrong that a check could find."))
    findings.sort(key=lambda f: _ORDER[f.severity])
    return Diagnosis(
        domain_id=row.id, apex=row.apex, checked_at=services.clock.now(),
        verdict=_verdict(findings), summary=_summary(findings),
        zone=zone.name if zone else delegation.zone if delegation else None,
        nameservers=list(zone.nameservers) if zone else _nameservers(delegation),
        records=[_report("delegation", delegation_seen, zone), _report("ownership", ownership, zone)],
        findings=findings, provider=provider, dns_host_name=_host_name(host_seen),
    )


def _nameservers(delegation: Delegation | None) -> list[str]:
    """The NS names of a zone the resolvers could not answer for, as its parent's referral gave them."""
    if delegation is None:
        return []
    return sorted([check.nameserver for check in delegation.checks] + list(delegation.unasked))


async def _chain(services: Services, record: Seen, zone: Zone | None) -> Chain | None:
    """Where the CNAME leads, when it is published but does not point straight at the target (nor
    at the target with the zone appended, which has a finding of its own)."""
    lookup = record.best()
    if lookup is None or lookup.outcome != "found" or any(same_name(v, record.expected) for v in lookup.values):
        return None
    if zone is not None and same_name(lookup.values[0], f"{record.expected}.{zone.name}"):
        return None
    return await follow(services.dns, record.name, lookup.values[0], record.expected)


def _leads_to(lookup: Lookup, target: str, followed: Chain | None) -> bool:
    """A resolver's CNAME answer points at the target, or starts the chain that ends there."""
    if lookup.outcome != "found":
        return False
    if any(same_name(v, target) for v in lookup.values):
        return True
    return followed is not None and followed.end == "target" and same_name(lookup.values[0], followed.names[1])


def _host_name(row: DomainRow) -> str | None:
    host = dns_hosts.by_key(row.dns_host.host) if row.dns_host is not None else None
    return host.name if host is not None else None


async def _visible_by(services: Services, record: Seen, resolvers: dict[str, Resolver]) -> dict[str, str]:
    """For each resolver still answering "no such record" for a record the zone publishes: when it
    says it will forget that answer (``HH:MM UTC``)."""
    if record.authoritative is None or record.authoritative.outcome != "found":
        return {}
    times = {}
    for label, lookup in record.resolvers:
        ttl = await negative_ttl(resolvers[label], lookup)
        if ttl is not None:
            times[label] = by_minute(services.clock.now() + dt.timedelta(seconds=ttl))
    return times


#: A CNAME missing or pointing elsewhere, as record findings and as drift problems.
CNAME_DRIFT = ("delegation_missing", "delegation_wrong")
#: Certificates that serve traffic, renewed through the CNAME (as provider_findings counts them).
_SERVING = ("active", "renewing")
#: What shows that a drift problem is gone, by its code: the next check (through the resolvers)
#: clears it only when they see the CNAME right, and CAA allowing issuance again.
_CLEARED_BY = {"delegation_missing": "resolvers", "delegation_wrong": "resolvers", "dnssec_failure": "resolvers",
               "lame_delegation": "resolvers", "caa_forbids": "caa"}


def drift_findings(findings: list[Finding], row: DomainRow, *, resolvers_see: bool, caa_allows: bool,
                   cname_said: bool = False) -> None:
    """What the checks recorded as drift: still to fix, or fixed and waiting for a check to see it.
    Each problem is judged by its own evidence: the CNAME, as every resolver answers it now (a
    DNSSEC or lame failure makes them fail), or CAA, as the pre-flight reads it now. ``cname_said``:
    a CNAME still missing or wrong is already a finding (renewal_at_risk), not repeated here."""
    for problem in row.drift:
        if cname_said and problem.code in CNAME_DRIFT and not problem.waiting and not resolvers_see:
            continue
        since = f"Since {row.drift_since:%Y-%m-%d %H:%M} UTC, checks find: " if row.drift_since else ""
        evidence = _CLEARED_BY.get(problem.code)
        if problem.waiting and not (evidence == "resolvers" and resolvers_see):
            findings.append(Finding("drift_recorded", "info", f"{since}{problem.message}"))
        elif evidence == "resolvers" and resolvers_see:
            findings.append(Finding("drift_recorded", "info",
                                    f"{since}{problem.message} Every resolver now sees the CNAME right: the next "
                                    'check clears this (or "Check now").'))
        elif evidence == "caa" and caa_allows:
            findings.append(Finding("drift_recorded", "info",
                                    f"{since}{problem.message} CAA allows issuance now: the next check clears this."))
        else:
            findings.append(Finding("drift_recorded", "error", f"{since}{problem.message}", fix=problem.fix))


def _report(purpose: str, record: Seen, zone: Zone | None) -> RecordReport:
    answers = []
    if record.authoritative is not None:
        answers.append(_answer("authoritative", record.authoritative))
    answers += [_answer(label, lookup) for label, lookup in record.resolvers]
    return RecordReport(purpose=purpose, type=record.rtype, name=record.name, relative_name=relative_to_zone(record.name, zone),
                        expected=record.expected, answers=answers)


def _answer(source: str, lookup: Lookup) -> Answer:
    return Answer(source=source, outcome=lookup.outcome, values=list(lookup.values), ttl=lookup.ttl,
                  detail=lookup.detail or None)


#: Findings that time alone resolves: a cache, a resolver or the provider still at work.
_WAITING = frozenset({"not_yet_visible", "still_cached", "lookup_failed", "renewal_unchecked", "provider_pending",
                      "orders_waiting"})


def _verdict(findings: list[Finding]) -> str:
    if any(f.severity == "error" for f in findings):
        return "action_needed"
    if any(f.code in _WAITING for f in findings):
        return "waiting"
    return "ok"


def _summary(findings: list[Finding]) -> str:
    first = findings[0]
    if first.severity == "info":
        return first.message
    more = sum(1 for f in findings if f.severity != "info") - 1
    return first.message + (f" ({more} more finding{'s' if more != 1 else ''} below.)" if more else "")
