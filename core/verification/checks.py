"""Proving control of a hostname with real DNS lookups: verify-delegation and recheck.

Both records must be found: the delegation CNAME pointing at the provider's target and the
ownership TXT carrying the workspace token. Each check says exactly what DNS answered and
what was expected, and that sentence is also kept in ``validation.lastError``.

Validation status after a check of a domain not yet verified:

| what DNS showed                                  | next status |
|--------------------------------------------------|-------------|
| both records right                               | verified    |
| a record present but wrong, or DNSSEC failing    | error       |
| the zone's nameservers do not answer for it       | error       |
| a record missing                                 | pending     |
| a lookup failed (timeout, SERVFAIL, ...) otherwise | pending     |

A record the resolvers do not see yet, but the zone's own nameservers publish, keeps the domain
``pending`` with opsStatus ``pending`` too: only a resolver's cache is left to wait for. A lookup
that fails because the zone's nameservers do not answer for it (a lame delegation) is "wrong", with
the zone's delegation named: that is no passing failure. Any other failed lookup is: the check
learnt nothing, the domain waits (opsStatus ``pending``, nothing for the customer to change), and
the background checks ask again soon (core/lifecycle/watcher.py). A CNAME that points to another name whose
CNAMEs lead to the target is right: certificate authorities follow chains (core/dns/chain.py).

A verified domain stays verified while its ownership holds (core/verification/ownership.py: a TXT
holding another workspace's token undoes it); a missing or wrong CNAME (or DNSSEC failing) is
drift (core/domains/drift.py), recorded with its fix until a check finds it back.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import TYPE_CHECKING

import attrs

from core.certificates import issuance
from core.certificates.results import IssuanceSummary
from core.clock import by_minute
from core.dns.authority import Walk
from core.dns.lookups import Lookup
from core.dns.probe import dnssec_fix, negative_ttl, unchecked
from core.domains import schedule
from core.domains.drift import CAA, DELEGATION, announce, needs_action, only_waiting, with_drift
from core.domains.operations import load
from core.domains.records import delegation_record, ops_status, ownership_record
from core.edge import ProviderError
from core.hostnames import zone_of
from core.verification import dns_host, lame, ownership
from core.verification.answers import RecordCheck, check_delegation, check_ownership, holds
from core.wire import INTERNAL
from store.records import DnsHostSeen, DomainRow, DriftProblem, Workspace

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)


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
    silent_zone: str | None = attrs.field(default=None, metadata={INTERNAL: True})
    """The zone whose nameservers do not answer for it (or, when that could not be found out, the
    zone no answer came from): its other domains' background checks wait a while rather than each
    spend the timeout (core/lifecycle/)."""
    missed: bool = attrs.field(default=False, metadata={INTERNAL: True})
    """A lookup got no answer (in time) though the zone's nameservers answer: the check learnt
    nothing, and is made again soon (core/lifecycle/)."""


@attrs.frozen
class RecheckResult:
    status: str
    "The domain's opsStatus after the check."
    checked_at: dt.datetime
    cert_status: str


@attrs.frozen
class LookedAgain:
    checks: list[RecordCheck]
    walk: Walk | None
    "The walk to the zone, when one was made."
    silent_zone: str | None = None
    "The zone that did not answer a failed lookup: lame, or (when that could not be told) unreachable."


def _unreachable_zone(apex: str, walk: Walk) -> str:
    """The zone of ``apex`` a walk got no answer from: the one right below the nearest name the
    resolvers answered for, on the way to ``apex``; else the registrable domain."""
    above = walk.parent[0].rstrip(".").lower() if walk.parent is not None else None
    labels = apex.lower().split(".")
    below = [".".join(labels[i:]) for i in range(len(labels) - 1, -1, -1)]  # the top-level domain first
    return next((name for name in below if above is not None and name.endswith("." + above)), zone_of(apex))


async def look_again(services: Services, apex: str, asked: list[tuple[Lookup, str, RecordCheck]]) -> LookedAgain:
    """What the resolver's answer alone does not tell, for each (lookup, expected value, check); the
    walk to the zone, when one was made; and the zone that gave no answer, when one did not.

    A SERVFAIL the resolver answers with DNSSEC checking disabled is a DNSSEC failure, which needs
    a fix, not patience: "wrong", so the domain is not handed to the provider. A record the
    resolver says is missing may already be published at the zone's own nameservers, hidden by the
    resolver's cached negative answer: then the message says when the resolver will see it (it
    stays "missing": the certificate authority's resolvers may hold the same answer). A lookup no
    resolver could answer may be a lame delegation: none of the zone's nameservers answers for it.
    When the zone's nameservers do answer, the lookup only missed: it stays "unknown".
    """
    walk: Walk | None = None
    delegation = None
    silent = None
    checks = []
    for lookup, expected, check in asked:
        if check.state == "unknown" and await unchecked(services.dns, lookup) is not None:
            check = RecordCheck("wrong", dnssec=True, message=(
                f"DNSSEC validation fails for {lookup.name}: the resolver answers SERVFAIL, and answers it when asked "
                "with DNSSEC checking disabled (expired signatures, or a DS record at the parent that matches no key). "
                "Certificate authorities validate DNSSEC, so no certificate is requested for the domain until this "
                f"is fixed. {dnssec_fix('holding ' + lookup.name)}"))
        elif check.state == "unknown" and lookup.outcome in ("timeout", "error"):
            walk = walk or await services.authority.walk(apex)
            delegation = delegation or await services.authority.delegation(walk, apex)
            if delegation is not None and delegation.lame:
                check = RecordCheck("wrong", message=lame.message(delegation, services.dns.timeout),
                                    lame=lame.fix(delegation))
                silent = delegation.zone
            elif delegation is None and walk.unanswered:  # not even the way to the zone answered
                silent = _unreachable_zone(apex, walk)
        elif check.state == "missing":
            walk = walk or await services.authority.walk(apex)
            published = await services.authority.ask(walk.zone, [(lookup.name, lookup.rtype)]) if walk.zone else None
            ttl = await negative_ttl(services.dns, lookup)
            check = attrs.evolve(check, cached_for=ttl)
            if published is not None and holds(published[1][0], expected):
                when = (f"by {by_minute(services.clock.now() + dt.timedelta(seconds=ttl))}" if ttl is not None
                        else "once that answer expires (at most the zone's SOA minimum TTL)")
                check = RecordCheck("missing", cached_for=ttl, published=True, message=(
                    f"The {lookup.rtype} record at {lookup.name} is published at the zone's own nameservers, but the "
                    f"resolver still holds its earlier \"no such record\" answer; it will see the record {when}. "
                    "Nothing to change: check again then."))
        checks.append(check)
    return LookedAgain(checks, walk, silent)


def next_status(checks: list[RecordCheck]) -> str:
    """The validation status of a domain not yet verified, after a check of both records: a lookup
    that only failed ("unknown") learnt nothing, and leaves it pending."""
    states = {c.state for c in checks}
    if states == {"ok"}:
        return "verified"
    if "wrong" in states:
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
    if check.state == "missing" and check.published:
        return [DriftProblem("delegation_missing", check.message, "Nothing to change: the next check clears this once "
                             "the resolver sees the CNAME.", waiting=True)]
    if check.state == "missing":
        return [DriftProblem("delegation_missing", check.message, f"Publish the CNAME at {host} to {target} again.")]
    return []


@attrs.frozen
class _Checked:
    row: DomainRow
    "The domain as the check stored it."
    cached_for: int | None
    "How long the resolver keeps a negative answer it gave."
    silent_zone: str | None
    "The zone that gave no answer (``VerifyResult.silent_zone``)."
    missed: bool
    "A lookup failed while the zone answers (``VerifyResult.missed``)."


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
    looked = await look_again(services, row.apex, judged)
    checks, walk = looked.checks, looked.walk
    if verified:
        checks += ownership.said(txt_check)
    now = services.clock.now()
    # A record is missing: the customer is at their DNS panel, and the walk names their DNS host,
    # which may have changed (a sub-zone delegated or un-delegated since it was last found). The
    # check that verifies the domain walks too: the records were just published, maybe in a zone
    # other than the one last found. What the host offers is asked only in a check a person asked
    # for (core/verification/dns_host.py).
    if walk is None and not verified and all(c.state == "ok" for c in checks):
        walk = await services.authority.walk(row.apex)
    host = await dns_host.seen(services, row, walk, discover=asked) \
        if walk is not None and dns_host.to_look_at(row, walk, now, asked=asked) else None
    # A verified domain's CNAME as drift; None when the lookup was inconclusive (drift left as it is).
    drift = _delegation_drift(checks[0], cname.host, cname.value) if checks[0].state != "unknown" else None
    updated = await services.store.run(_record_check, services, workspace, domain_id, checks, host=host,
                                       verified=verified, drift=drift, asked=asked, now=now)
    waits = [c.cached_for for c in checks if c.cached_for is not None]
    missed = looked.silent_zone is None and any(c.state == "unknown" for c in checks)
    return _Checked(updated, max(waits) if waits else None, looked.silent_zone, missed)


def _record_check(services: Services, workspace: Workspace, domain_id: uuid.UUID, checks: list[RecordCheck], *,
                  host: DnsHostSeen | None, verified: bool, drift: list[DriftProblem] | None, asked: bool,
                  now: dt.datetime) -> DomainRow:
    """The check's outcome, in one write of the domain read again (``verified``: as it was when the
    lookups began)."""
    problems = list(dict.fromkeys(c.message for c in checks if c.state != "ok"))  # one lame zone: said once
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
            # Every record published at the zone, some hidden by a resolver's cache, or a lookup that
            # only failed: only time is needed.
            waiting = all(c.state in ("ok", "unknown") or c.published for c in checks)
            updated = attrs.evolve(updated, validation_status=status, ops_status=ops_status(
                status, current.cert_status, drifted=needs_action(updated.drift), waiting=waiting))
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
        if only_waiting(row.drift):
            return "The domain stays verified. " + " ".join(p.message for p in row.drift)
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
                        certificate=certificate, cached_for=checked.cached_for, silent_zone=checked.silent_zone,
                        missed=checked.missed)


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
