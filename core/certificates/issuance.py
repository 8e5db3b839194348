"""Issuance and refresh: ask the edge provider, then store what it said in one transaction.

The network comes first and no transaction, nor unit of work (``store.run``), is held across it:
the reads before it are one unit, the storing after it another. What the provider answered is
stored at once: the Certificate, the Domain's ``cert`` summary and ``opsStatus``, the outbox event
of a new issuance request and the Idempotency-Key's response commit together or not at all.

- A new issuance request (issue, or verification of a domain without a usable certificate) runs
  the CAA pre-flight, asks the provider, stores the result and queues exactly one event.
- A refresh reads the provider's current state and stores it; it queues no event.
- When the provider gives no result (unreachable, 5xx, our request budget spent), nothing but
  the Domain's ``cert.lastError`` and ``traceId`` is written, and the caller gets the error.

Each provider interaction has a ``traceId``: in the log lines of the adapter and on the Domain. Its
calls are the workspace's (``for_workspace``): no workspace spends more than its share of the
provider's request budget (core/edge/pacing.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import TYPE_CHECKING

import attrs

from core.certificates import caa, events
from core.certificates import idempotency as idem
from core.certificates.states import Classified, classify, describe, retriggerable
from core.domains import operations, records
from core.edge import HostnameGone, ProviderRejected, ProviderState, ProviderUnavailable
from core.edge.pacing import for_workspace
from core.errors import Conflict, NotFound, WildcardNotSupported
from core.wire import dumps
from store.records import DEFAULT_ISSUER, Certificate, DomainRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)

RENEWAL_LEAD = dt.timedelta(days=30)
_FAILED = Classified("error", "error")


@attrs.frozen
class IssueRequest:
    """The optional issue body: only ``wildcard: false`` is supported; ``ca`` and ``chain`` are
    accepted for adapter compatibility and never sent to the provider."""

    wildcard: bool | None = None
    ca: str | None = None
    chain: str | None = None


@attrs.frozen
class IssuanceSummary:
    certificate_id: uuid.UUID
    status: str
    message: str
    next_renewal_at: dt.datetime | None = None


@attrs.frozen
class IssueOutcome:
    body: str
    "The summary's JSON, as first answered (a replay answers the stored text)."
    replayed: bool


def next_renewal(not_after: dt.datetime | None) -> dt.datetime | None:
    """The planning timestamp: 30 days before expiry, when the expiry is known."""
    return None if not_after is None else not_after - RENEWAL_LEAD


def summary_of(certificate: Certificate, message: str) -> IssuanceSummary:
    return IssuanceSummary(
        certificate_id=certificate.id,
        status=certificate.status,
        message=message,
        next_renewal_at=next_renewal(certificate.not_after),
    )


def load_certificate(services: Services, workspace: Workspace, certificate_id: uuid.UUID) -> Certificate:
    """A certificate of this workspace; another workspace's does not exist here."""
    certificate = services.store.certificates.get(workspace.id, certificate_id)
    if certificate is None:
        raise NotFound("Certificate not found.")
    return certificate


# --- operations -------------------------------------------------------------------------------


async def issue(
    services: Services,
    *,
    workspace: Workspace,
    domain_id: uuid.UUID,
    request: IssueRequest,
    idempotency: idem.IdempotencyKey | None,
) -> IssueOutcome:
    """POST .../certificates/issue: start issuance for a verified domain."""
    begun = await services.store.run(_begin_issue, services, workspace, domain_id, request, idempotency)
    if isinstance(begun, idem.Replay):
        return IssueOutcome(body=begun.body, replayed=True)
    if isinstance(begun, IssuanceSummary):
        return IssueOutcome(body=dumps(begun), replayed=False)
    try:
        summary = await request_issuance(services, workspace, begun.row, claim=begun.claim)
    except BaseException:
        if begun.claim is not None:
            await services.store.run(idem.release, services, begun.claim)
        raise
    return IssueOutcome(body=dumps(summary), replayed=False)


@attrs.frozen
class _Started:
    row: DomainRow
    claim: idem.Claim | None


def _begin_issue(
    services: Services, workspace: Workspace, domain_id: uuid.UUID, request: IssueRequest,
    idempotency: idem.IdempotencyKey | None,
) -> idem.Replay | IssuanceSummary | _Started:
    """Everything an issue request decides before the network, in one transaction: the key's
    claim is kept only when the request goes on (a refusal here rolls it back), and an already
    active certificate's answer is stored with it."""
    with services.store.transaction():
        claim = None
        if idempotency is not None:
            begun = idem.begin(services, workspace_id=workspace.id, key=idempotency)
            if isinstance(begun, idem.Replay):
                return begun
            claim = begun
        row = operations.load(services, workspace, domain_id)
        if row.validation_status != "verified":
            raise Conflict(
                "delegation_not_verified",
                "The domain's DNS records are not verified yet; publish both records and call verify-delegation first.",
            )
        if request.wildcard:
            raise WildcardNotSupported()
        latest = services.store.certificates.latest(workspace.id, row.id)
        if latest is None or latest.status != "active" or row.cert_status != "active":
            return _Started(row, claim)
        summary = summary_of(latest, "The certificate is already active; call refresh for the provider's latest state.")
        if claim is not None:
            idem.complete(services, claim, status_code=200, body=dumps(summary))
        return summary


async def request_issuance(
    services: Services, workspace: Workspace, row: DomainRow, *, claim: idem.Claim | None = None,
    records_checked: bool = False,
) -> IssuanceSummary:
    """A new issuance request to the provider, its result stored with exactly one event.

    An existing hostname whose validation timed out is validated again only when
    ``records_checked`` (a DNS check found both records just now): otherwise the provider's
    failure is stored as it reported it, with ``cert.issue_failed``.
    """
    trace_id = uuid.uuid4()
    verdict = await caa.preflight(services.dns, row.apex, services.config.provider.caa_issuers)
    if not verdict.allowed:
        log.info("issuance of %s stopped by the CAA pre-flight (trace %s)", row.apex, trace_id)
        return await services.store.run(_store, services, workspace, row.id, trace_id=trace_id, state=None,
                                         classified=_FAILED, message=verdict.message or "", new_request=True, claim=claim)
    try:
        with for_workspace(workspace.id):
            state = await services.provider.issue(row.apex, trace_id=trace_id)
            if retriggerable(state) and records_checked:
                # An adopted hostname that timed out, and the records are right now: validate again.
                state = await services.provider.revalidate(state.hostname_id, apex=row.apex, trace_id=trace_id)
    except ProviderRejected as exc:
        return await services.store.run(_store, services, workspace, row.id, trace_id=trace_id, state=None,
                                         classified=_FAILED, message=exc.message, new_request=True, claim=claim)
    except ProviderUnavailable as exc:
        await services.store.run(_note_failure, services, workspace, row.id, message=exc.message, trace_id=trace_id)
        raise
    return await services.store.run(_store_requested, services, workspace, row.id, trace_id=trace_id, state=state,
                                     caa_message=verdict.message, claim=claim)


def _store_requested(
    services: Services, workspace: Workspace, domain_id: uuid.UUID, *, trace_id: uuid.UUID, state: ProviderState,
    caa_message: str | None, claim: idem.Claim | None,
) -> IssuanceSummary:
    """The provider's answer to a new request, classified against the domain's latest certificate."""
    latest = services.store.certificates.latest(workspace.id, domain_id)
    # Asking again for a hostname whose certificate was already active (a renewal under way).
    was_active = latest is not None and latest.provider_hostname_id == state.hostname_id and latest.not_before is not None
    classified = classify(state, was_active=was_active)
    message = " ".join(m for m in (describe(state, classified), caa_message) if m)
    return _store(services, workspace, domain_id, trace_id=trace_id, state=state, classified=classified,
                  message=message, new_request=True, claim=claim)


async def refresh(services: Services, *, workspace: Workspace, certificate_id: uuid.UUID) -> IssuanceSummary:
    """POST /v1/certificates/:id/refresh: the provider's current state, stored; no event."""
    certificate = await services.store.run(load_certificate, services, workspace, certificate_id)
    return await refresh_loaded(services, workspace, certificate)


async def refresh_loaded(services: Services, workspace: Workspace, certificate: Certificate) -> IssuanceSummary:
    """``refresh`` of a certificate its caller has just read (one unit of work fewer)."""
    if certificate.provider_hostname_id is None:
        return summary_of(certificate, certificate.last_error or "This certificate never reached the edge provider.")
    trace_id = uuid.uuid4()
    try:
        with for_workspace(workspace.id):
            state = await services.provider.refresh(certificate.provider_hostname_id, apex=certificate.apex, trace_id=trace_id)
    except ProviderUnavailable as exc:
        await services.store.run(_note_failure, services, workspace, certificate.domain_id, message=exc.message,
                                 trace_id=trace_id)
        raise
    except ProviderRejected as exc:
        message = (
            "The edge provider no longer has this hostname; issue a new certificate."
            if isinstance(exc, HostnameGone) else exc.message
        )
        return await services.store.run(_store, services, workspace, certificate.domain_id, trace_id=trace_id, state=None,
                                         classified=_FAILED, message=message, new_request=False, certificate=certificate)
    classified = classify(state, was_active=certificate.not_before is not None)
    return await services.store.run(_store, services, workspace, certificate.domain_id, trace_id=trace_id, state=state,
                                     classified=classified, message=describe(state, classified), new_request=False,
                                     certificate=certificate)


async def start_or_check(services: Services, workspace: Workspace, row: DomainRow) -> IssuanceSummary:
    """What verification does for a verified domain whose certificate is not active, once its DNS
    check found both records: a new request when there is no usable certificate (none yet, or it
    failed; a timed-out validation is then tried again), a refresh otherwise."""
    latest = await services.store.run(services.store.certificates.latest, workspace.id, row.id)
    if latest is None or latest.provider_hostname_id is None or row.cert_status in ("none", "error"):
        return await request_issuance(services, workspace, row, records_checked=True)
    return await refresh_loaded(services, workspace, latest)


# --- storing ----------------------------------------------------------------------------------


def _store(
    services: Services,
    workspace: Workspace,
    domain_id: uuid.UUID,
    *,
    trace_id: uuid.UUID,
    state: ProviderState | None,
    classified: Classified,
    message: str,
    new_request: bool,
    certificate: Certificate | None = None,
    claim: idem.Claim | None = None,
) -> IssuanceSummary:
    """One transaction: Certificate, Domain summary, event (new requests), idempotency record."""
    store = services.store
    now = services.clock.now()
    with store.transaction():
        row = operations.load(services, workspace, domain_id)  # deleted meanwhile: 404, nothing written
        latest = store.certificates.latest(workspace.id, domain_id)
        if certificate is not None:
            existing = store.certificates.get(workspace.id, certificate.id)
            if existing is None:
                raise NotFound("Certificate not found.")
        elif latest is not None and latest.status == "pending" and state is not None and latest.provider_hostname_id == state.hostname_id:
            existing = latest  # the same provider hostname, still on its way: one record, not two
        else:
            existing = None
        base = existing or _new_certificate(services, row, now)
        if classified.certificate == "active" and state is not None and state.expires_at is not None and state.expires_at <= now:
            classified = _FAILED  # never shown as active past its expiry
            message = (f"The certificate expired on {state.expires_at:%Y-%m-%d %H:%M} UTC and the edge provider has not "
                       "renewed it; check the delegation CNAME (GET /v1/domains/:id/diagnosis), then issue again.")
        updated = _apply(base, state, classified, message, now)
        announce = events.to_announce(services, base, updated, new_request=new_request)
        if announce is not None:
            updated = attrs.evolve(updated, announced=(*updated.announced, announce))
        if existing is None:
            store.certificates.insert(updated)
        else:
            store.certificates.update(updated)
        # A refresh of an older certificate must not overwrite the summary of the latest one.
        if certificate is None or latest is None or latest.id == updated.id:
            became_active = updated.status == "active" and base.not_before is None
            store.domains.update(_domain_with(row, updated, state, classified, message, trace_id, now, became_active))
        summary = summary_of(updated, message)
        if announce is not None:
            events.record(services, updated, announce)
        if claim is not None:
            idem.complete(services, claim, status_code=200, body=dumps(summary))
    log.info("certificate %s of %s: %s / %s (trace %s)", updated.id, row.apex, updated.status, classified.domain, trace_id)
    return summary


def _new_certificate(services: Services, row: DomainRow, now: dt.datetime) -> Certificate:
    return Certificate(
        id=uuid.uuid4(),
        workspace_id=row.workspace_id,
        domain_id=row.id,
        apex=row.apex,
        wildcard=False,
        issuer=DEFAULT_ISSUER,
        status="pending",
        provider=services.provider.name,
        bundle_available=False,
        created_at=now,
    )


def _apply(base: Certificate, state: ProviderState | None, classified: Classified, message: str, now: dt.datetime) -> Certificate:
    certificate = attrs.evolve(
        base,
        status=classified.certificate,
        not_before=base.not_before or (now if classified.certificate == "active" else None),
        last_error=message if classified.certificate == "error" else None,
    )
    if state is None:
        return certificate
    return attrs.evolve(
        certificate,
        issuer=state.issuer or base.issuer,
        not_after=state.expires_at or base.not_after,
        provider_certificate_id=state.certificate_id or base.provider_certificate_id,
        provider_hostname_id=state.hostname_id,
        provider_ssl_id=state.ssl_id or base.provider_ssl_id,
        provider_status=state.ssl_status,
        provider_hostname_status=state.hostname_status,
        last_checked_at=now,
    )


def _domain_with(
    row: DomainRow,
    certificate: Certificate,
    state: ProviderState | None,
    classified: Classified,
    message: str,
    trace_id: uuid.UUID,
    now: dt.datetime,
    became_active: bool,
) -> DomainRow:
    """The Domain's ``cert`` summary mirrors its latest certificate."""
    failed = classified.domain in ("error", "blocked")
    return attrs.evolve(
        row,
        cert_status=classified.domain,
        cert_issuer=certificate.issuer if certificate.issuer != DEFAULT_ISSUER else None,
        cert_not_after=certificate.not_after,
        cert_next_renewal_at=next_renewal(certificate.not_after),
        cert_last_issued_at=((state and state.issued_at) or now) if became_active else row.cert_last_issued_at,
        cert_error=message if failed else None,
        cert_trace_id=trace_id,
        ops_status=records.ops_status(row.validation_status, classified.domain, drifted=bool(row.drift)),
        # The provider's own statement of the delegation target wins over the one we derived.
        delegation_target=(state and state.delegation_target) or row.delegation_target,
        updated_at=now,
    )


def _note_failure(services: Services, workspace: Workspace, domain_id: uuid.UUID, *, message: str, trace_id: uuid.UUID) -> None:
    """No result from the provider: only the Domain's error state records the attempt."""
    with services.store.transaction():
        row = services.store.domains.get(workspace.id, domain_id)
        if row is not None:
            services.store.domains.update(
                attrs.evolve(row, cert_error=message, cert_trace_id=trace_id, updated_at=services.clock.now())
            )
    log.warning("edge provider gave no result for domain %s: %s (trace %s)", domain_id, message, trace_id)
