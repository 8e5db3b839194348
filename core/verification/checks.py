"""Proving control of a hostname with real DNS lookups: verify-delegation and recheck.

Both records must be found: the delegation CNAME pointing at the provider's target and the
ownership TXT carrying the workspace token. Each check says exactly what DNS answered and
what was expected, and that sentence is also kept in ``validation.lastError``.

Validation status after a check of a domain not yet verified:

| what DNS showed                                  | next status |
|--------------------------------------------------|-------------|
| both records right                               | verified    |
| a record present but wrong, or DNSSEC failing    | error       |
| a lookup failed (timeout, SERVFAIL, ...)          | error       |
| a record missing                                 | pending     |

A record the resolvers do not see yet, but the zone's own nameservers publish, keeps the domain
``pending`` with opsStatus ``pending`` too: only a resolver's cache is left to wait for. A lookup
that fails because the zone's nameservers do not answer for it (a lame delegation) is "wrong", with
the zone's delegation named: that is no passing failure. A CNAME that points to another name whose
CNAMEs lead to the target is right: certificate authorities follow chains (core/dns/chain.py).

A verified domain stays verified while its ownership holds (core/verification/ownership.py: a TXT
holding another workspace's token undoes it); a missing or wrong CNAME (or DNSSEC failing) is
drift (core/domains/drift.py), recorded with its fix until a check finds it back.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import TYPE_CHECKING, Literal

import attrs

from core.certificates import issuance
from core.certificates.results import IssuanceSummary
from core.clock import by_minute
from core.dns import chain
from core.dns.authority import Walk
from core.dns.lookups import Lookup, Resolver
from core.dns.probe import dnssec_fix, negative_ttl, unchecked
from core.domains import schedule
from core.domains.drift import CAA, DELEGATION, announce, with_drift
from core.domains.operations import load
from core.domains.records import delegation_record, ops_status, ownership_record
from core.edge import ProviderError
from core.verification import dns_host, lame, ownership
from core.wire import INTERNAL
from store.records import DnsHostSeen, DomainRow, DriftProblem, Workspace

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)
State = Literal["ok", "missing", "wrong", "unknown"]


@attrs.frozen
class RecordCheck:
    state: State
    message: str
    dnssec: bool = False
    "Wrong because the zone's DNSSEC does not validate."
    lame: str | None = None
    "Wrong because the zone's nameservers do not answer for it: the fix (core/verification/lame.py)."
    cached_for: int | None = None
    "For a missing record: how many more seconds the resolver keeps saying so, when it says."
    published: bool = False
    "Missing at the resolvers only: the zone's own nameservers publish it, a cached answer hides it."
    other_token: str | None = None
    "Wrong because the TXT record holds another ownership token (this one) and not ours."


@attrs.frozen
class VerifyResult:
    status: str
    "The domain's validation status after the check."
    checked_at: dt.datetime
    message: str
    certificate: IssuanceSummary | None = None
    "The issuance summary, when issuance was started or checked and the provider answered."
    cached_for: int | None = attrs.field(default=None, metadata={INTERNAL: True})
    "How long the resolver keeps the negative answer this check got: no use asking before (core/lifecycle/)."
    unanswered: bool = attrs.field(default=False, metadata={INTERNAL: True})
    """A lookup got no answer in time, or the zone's nameservers do not answer for it: the zone's
    other domains' background checks wait a while rather than each spend the timeout (core/lifecycle/)."""


@attrs.frozen
class RecheckResult:
    status: str
    "The domain's opsStatus after the check."
    checked_at: dt.datetime
    cert_status: str


def _same_name(a: str, b: str) -> bool:
    return a.rstrip(".").lower() == b.rstrip(".").lower()


def _failed(lookup: Lookup) -> RecordCheck:
    if lookup.outcome == "timeout":
        waited = f" after {lookup.waited:.1f} s" if lookup.waited is not None else ""
        return RecordCheck("unknown", f"The DNS lookup of {lookup.rtype} at {lookup.name} got no answer: the resolver "
                                      f"did not reply, and the DNS client gave up{waited} (its tries ran out); try "
                                      "again shortly.")
    return RecordCheck("unknown", f"The DNS lookup of {lookup.rtype} at {lookup.name} failed ({lookup.detail or 'server error'}); try again shortly.")


def chain_check(followed: chain.Chain, target: str) -> RecordCheck:
    """A CNAME that does not point straight at ``target``, judged by where its chain ends."""
    host, first = followed.names[0], followed.names[1]
    if followed.end == "target":
        return RecordCheck("ok", f"The CNAME at {host} points to {first}, and the chain ({followed}) ends at "
                                 f"{target}: certificate authorities follow it.")
    if followed.end == "loop":
        return RecordCheck("wrong", f"The CNAME at {host} leads into a loop ({followed}): no resolver can follow "
                                    f"it. Point it straight to {target}.")
    if followed.end == "unknown":
        return RecordCheck("unknown", f"The CNAME at {host} points to {first}, and the chain ({followed}) could not "
                                      f"be followed past {followed.last}; try again shortly.")
    if len(followed.names) == 2:
        return RecordCheck("wrong", f"The CNAME at {host} points to {first}; it must point to {target}.")
    ends = "is too long for resolvers to follow" if followed.end == "too_long" else f"ends at {followed.last}"
    return RecordCheck("wrong", f"The CNAME at {host} points to {first}, and the chain ({followed}) {ends}, not at "
                                f"{target}; point it straight to {target}.")


async def check_delegation(dns: Resolver, lookup: Lookup, target: str) -> RecordCheck:
    """Judge the CNAME ``lookup``; a name with no CNAME is asked for TXT records that would block one."""
    host = lookup.name
    if lookup.outcome == "found":
        if any(_same_name(v, target) for v in lookup.values):
            return RecordCheck("ok", f"The CNAME at {host} points to {target}.")
        return chain_check(await chain.follow(dns, host, lookup.values[0], target), target)
    if lookup.outcome == "nxdomain":
        return RecordCheck("missing", f"No record exists at {host} (NXDOMAIN); publish a CNAME to {target}.")
    if lookup.outcome == "nodata":
        # A leftover TXT at the same name is the classic reason a CNAME cannot be published.
        others = await dns.lookup(host, "TXT")
        if others.outcome == "found":
            return RecordCheck(
                "wrong",
                f"{host} has TXT records but no CNAME; remove them and publish a CNAME to {target} "
                "(a CNAME cannot share its name with other records).",
            )
        return RecordCheck("missing", f"{host} exists but has no CNAME record; publish a CNAME to {target}.")
    return _failed(lookup)


def split_over_records(values: list[str], expected: str) -> bool:
    """Two TXT records that together make the value (a panel that cut it, or a person who did):
    each record is compared whole, so the token is not found, though it looks published."""
    wanted = expected.lower()
    texts = [v.strip().strip('"').lower() for v in values]
    return any(a + b == wanted for a in texts for b in texts if a is not b)


def check_ownership(lookup: Lookup, expected: str) -> RecordCheck:
    """Judge the TXT ``lookup``."""
    host = lookup.name
    if lookup.outcome == "found":
        values = [v.strip().strip('"') for v in lookup.values]
        if any(v.lower() == expected.lower() for v in values):
            return RecordCheck("ok", f"The TXT record at {host} holds the ownership token.")
        if split_over_records(values, expected):
            return RecordCheck("wrong", f"The ownership value at {host} is split over two TXT records; put the whole "
                                        f"value {expected} in one TXT record.")
        prefix = expected.split("=", 1)[0] + "="
        other = [v for v in values if v.lower().startswith(prefix)]
        if other:
            return RecordCheck("wrong", f"The TXT record at {host} holds another token ({other[0]}); it must be {expected}.",
                               other_token=other[0])
        shown = ", ".join(values[:3])
        return RecordCheck("wrong", f"The TXT records at {host} ({shown}) do not include {expected}.")
    if lookup.outcome == "nxdomain":
        return RecordCheck("missing", f"No record exists at {host} (NXDOMAIN); publish a TXT record {expected}.")
    if lookup.outcome == "nodata":
        return RecordCheck("missing", f"{host} exists but has no TXT record; publish a TXT record {expected}.")
    return _failed(lookup)


def _holds(lookup: Lookup, expected: str) -> bool:
    if lookup.outcome != "found":
        return False
    if lookup.rtype == "CNAME":
        return any(_same_name(v, expected) for v in lookup.values)
    return any(v.strip().strip('"').lower() == expected.lower() for v in lookup.values)


async def look_again(services: Services, apex: str,
                     asked: list[tuple[Lookup, str, RecordCheck]]) -> tuple[list[RecordCheck], Walk | None]:
    """What the resolver's answer alone does not tell, for each (lookup, expected value, check); and
    the walk to the zone, when one was made.

    A SERVFAIL the resolver answers with DNSSEC checking disabled is a DNSSEC failure, which needs
    a fix, not patience: "wrong", so the domain is not handed to the provider. A record the
    resolver says is missing may already be published at the zone's own nameservers, hidden by the
    resolver's cached negative answer: then the message says when the resolver will see it (it
    stays "missing": the certificate authority's resolvers may hold the same answer). A lookup no
    resolver could answer may be a lame delegation: none of the zone's nameservers answers for it.
    """
    walk: Walk | None = None
    delegation = None
    checks = []
    for lookup, expected, check in asked:
        if check.state == "unknown" and await unchecked(services.dns, lookup) is not None:
            check = RecordCheck("wrong", dnssec=True, message=(
                f"DNSSEC validation fails for {lookup.name}: the resolver answers SERVFAIL, and answers it when asked "
                "with DNSSEC checking disabled (expired signatures, or a DS record at the parent that matches no key). "
                "Certificate authorities validate DNSSEC, so the domain is not handed to the edge provider until this "
                f"is fixed. {dnssec_fix('holding ' + lookup.name)}"))
        elif check.state == "unknown" and lookup.outcome in ("timeout", "error"):
            walk = walk or await services.authority.walk(apex)
            delegation = delegation or await services.authority.delegation(walk, apex)
            if delegation is not None and delegation.lame:
                check = RecordCheck("wrong", message=lame.message(delegation, services.dns.timeout),
                                    lame=lame.fix(delegation))
        elif check.state == "missing":
            walk = walk or await services.authority.walk(apex)
            published = await services.authority.ask(walk.zone, [(lookup.name, lookup.rtype)]) if walk.zone else None
            ttl = await negative_ttl(services.dns, lookup)
            check = attrs.evolve(check, cached_for=ttl)
            if published is not None and _holds(published[1][0], expected):
                when = (f"by {by_minute(services.clock.now() + dt.timedelta(seconds=ttl))}" if ttl is not None
                        else "once that answer expires (at most the zone's SOA minimum TTL)")
                check = RecordCheck("missing", cached_for=ttl, published=True, message=(
                    f"The {lookup.rtype} record at {lookup.name} is published at the zone's own nameservers, but the "
                    f"resolver still holds its earlier \"no such record\" answer; it will see the record {when}. "
                    "Nothing to change: check again then."))
        checks.append(check)
    return checks, walk


def next_status(checks: list[RecordCheck]) -> str:
    """The validation status of a domain not yet verified, after a check of both records."""
    states = {c.state for c in checks}
    if states == {"ok"}:
        return "verified"
    if states & {"wrong", "unknown"}:
        return "error"
    return "pending"


def _delegation_drift(check: RecordCheck, host: str, target: str) -> list[DriftProblem]:
    """A verified domain's CNAME check as drift: what is wrong, with the fix."""
    if check.state == "wrong" and check.dnssec:
        return [DriftProblem("dnssec_failure", check.message, dnssec_fix("holding " + host))]
    if check.state == "wrong" and check.lame:
        return [DriftProblem("lame_delegation", check.message, check.lame)]
    if check.state == "wrong":
        return [DriftProblem("delegation_wrong", check.message, f"Set the CNAME at {host} to {target} again.")]
    if check.state == "missing":
        return [DriftProblem("delegation_missing", check.message, f"Publish the CNAME at {host} to {target} again.")]
    return []


@attrs.frozen
class _Checked:
    row: DomainRow
    "The domain as the check stored it."
    cached_for: int | None
    "How long the resolver keeps a negative answer it gave."
    unanswered: bool
    "A lookup timed out, or the zone is lame."


async def _check_dns(services: Services, workspace: Workspace, domain_id: uuid.UUID, *, asked: bool) -> _Checked:
    """Look the records up (no transaction held), then store the outcome in one write.

    A verified domain stays verified while its ownership holds (core/verification/ownership.py): a
    problem with its CNAME is drift (core/domains/drift.py), kept until a check finds it fixed. A
    check a person asked for (``asked``) starts the background schedule again.

    Both questions go in one ``lookup_many``: two lookups gathered cost two more tasks and a second
    pass through the resolver's per-lookup work, 2-3 % of the service's CPU in 500 concurrent
    verifications.
    """
    row = await services.store.run(load, services, workspace, domain_id)
    cname, txt = delegation_record(row), ownership_record(row)
    verified = row.validation_status == "verified"
    lookups = await services.dns.lookup_many([(cname.host, "CNAME"), (txt.host, "TXT")])
    judged = [(lookups[0], cname.value, await check_delegation(services.dns, lookups[0], cname.value))]
    txt_check = check_ownership(lookups[1], txt.value)
    if not verified:
        judged.append((lookups[1], txt.value, txt_check))
    checks, walk = await look_again(services, row.apex, judged)
    if verified:
        checks += ownership.said(txt_check)
    now = services.clock.now()
    # A record is missing: the customer is at their DNS panel, and the walk names their DNS host,
    # which may have changed (a sub-zone delegated or un-delegated since it was last found). What
    # it offers is asked only in a check a person asked for (core/verification/dns_host.py).
    host = await dns_host.seen(services, row, walk, discover=asked) \
        if walk is not None and dns_host.to_look_at(row, walk, now, asked=asked) else None
    # A verified domain's CNAME as drift; None when the lookup was inconclusive (drift left as it is).
    drift = _delegation_drift(checks[0], cname.host, cname.value) if checks[0].state != "unknown" else None
    updated = await services.store.run(_record_check, services, workspace, domain_id, checks, host=host,
                                       verified=verified, drift=drift, asked=asked, now=now)
    waits = [c.cached_for for c in checks if c.cached_for is not None]
    unanswered = any(lookup.outcome == "timeout" for lookup in lookups) or any(c.lame for c in checks)
    return _Checked(updated, max(waits) if waits else None, unanswered)


def _record_check(services: Services, workspace: Workspace, domain_id: uuid.UUID, checks: list[RecordCheck], *,
                  host: DnsHostSeen | None, verified: bool, drift: list[DriftProblem] | None, asked: bool,
                  now: dt.datetime) -> DomainRow:
    """The check's outcome, in one write of the domain read again (``verified``: as it was when the
    lookups began)."""
    problems = [c.message for c in checks if c.state != "ok"]
    moved = verified and ownership.moved(checks)
    with services.store.transaction():
        current = load(services, workspace, domain_id)  # deleted meanwhile: 404
        updated = attrs.evolve(current, validation_checked_at=now, validation_error=" ".join(problems) or None, updated_at=now)
        if host is not None:
            updated = attrs.evolve(updated, dns_host=host)
        if verified and current.validation_status == "verified" and not moved:
            if drift is not None:
                updated = with_drift(updated, drift, replacing=DELEGATION, now=now)
        else:
            status = next_status(checks)
            if current.validation_status == "verified" and status != "verified":
                updated = with_drift(updated, [], replacing=DELEGATION + CAA, now=now)  # drift is a verified domain's
            # Every record published at the zone, some hidden by a resolver's cache: only time is needed.
            waiting = all(c.state == "ok" or c.published for c in checks)
            updated = attrs.evolve(updated, validation_status=status, ops_status=ops_status(
                status, current.cert_status, drifted=bool(updated.drift), waiting=waiting))
        updated = ownership.changed(services, workspace, current, updated, now)
        if asked:
            updated = schedule.restarted(updated, services.config.lifecycle, now)
        services.store.domains.update(updated)
        announce(services, current, updated)
    return updated


async def _issuance(services: Services, workspace: Workspace, row: DomainRow) -> tuple[IssuanceSummary | None, str]:
    """Where verified DNS hands over to the edge provider: start or check issuance.

    Never raises for the provider's sake: verification answers 200 whatever the provider did, with
    what happened in the message (and in ``cert.lastError``, written by the issuance code).
    """
    try:
        summary = await issuance.start_or_check(services, workspace, row)
    except ProviderError as exc:
        return None, f"Certificate issuance could not proceed: {exc.message}"
    return summary, summary.message


#: Said after a failed check: it asks the resolvers only, while the diagnosis also asks the zone's
#: own servers and names the common mistakes (a doubled zone, the zone's own name used, a cache).
DIAGNOSIS_POINTER = (
    'The diagnosis names the exact fix: GET /v1/domains/:id/diagnosis, or "Diagnose" on the DNS page or '
    "the verification link's page."
)


def _summary(row: DomainRow) -> str:
    if row.validation_status == "verified":
        if row.drift:
            return ("The domain stays verified, but the next renewal of its certificate will fail until this is fixed: "
                    + " ".join(f"{p.message} {p.fix}" for p in row.drift))
        if row.validation_error:
            return "The domain stays verified, but this check was inconclusive. " + row.validation_error
        return "Both DNS records are in place; the domain is verified."
    said = "DNS is still pending." if row.validation_status == "pending" else "DNS verification failed."
    return " ".join(part for part in (said, row.validation_error, DIAGNOSIS_POINTER) if part)


async def verify(services: Services, *, workspace: Workspace, domain_id: uuid.UUID, asked: bool = True) -> VerifyResult:
    """verify-delegation; also the background check of a domain waiting for its records (not ``asked``)."""
    checked = await _check_dns(services, workspace, domain_id, asked=asked)
    row = checked.row
    certificate, message = None, _summary(row).strip()
    if row.validation_status == "verified" and row.cert_status != "active" and not row.drift:
        certificate, said = await _issuance(services, workspace, row)
        message = f"{message} {said}"
    assert row.validation_checked_at is not None  # _check_dns has just set it
    return VerifyResult(status=row.validation_status, checked_at=row.validation_checked_at, message=message,
                        certificate=certificate, cached_for=checked.cached_for, unanswered=checked.unanswered)


async def recheck(services: Services, *, workspace: Workspace, domain_id: uuid.UUID) -> RecheckResult:
    """Verify DNS, then start or check issuance; an active certificate is refreshed (spec rule 8)."""
    row = (await _check_dns(services, workspace, domain_id, asked=True)).row
    if row.validation_status == "verified" and row.cert_status != "active" and not row.drift:
        await _issuance(services, workspace, row)
    else:
        latest = await services.store.run(services.store.certificates.latest, workspace.id, row.id)
        if latest is not None and latest.provider_hostname_id is not None:
            try:
                await issuance.refresh(services, workspace=workspace, certificate_id=latest.id)
            except ProviderError as exc:
                log.info("recheck of %s: no provider result (%s)", row.apex, exc.message)
    row = await services.store.run(load, services, workspace, domain_id)
    assert row.validation_checked_at is not None  # _check_dns set it; nothing clears it
    return RecheckResult(status=row.ops_status, checked_at=row.validation_checked_at, cert_status=row.cert_status)
