"""Storing what the provider said about a certificate, in one transaction, and its summary.

Whatever asked (a new issuance request, validating again, a refresh; core/certificates/issuance.py),
its answer is stored the same way: the Certificate, the Domain's ``cert`` summary and ``opsStatus``,
the outbox event of a new issuance request and the Idempotency-Key's response commit together or
not at all. A certificate is never shown ``active`` past its expiry.

``nextRenewalAt`` is the renewal time the service goes by, on the certificate's own clock
(core/lifetimes.py): the provider's own (ACME: in the CA's window, else two thirds into the life),
else two thirds into the life the provider reports (30 days before expiry for a 90-day
certificate, two days for a six-day one). ``lastIssuedAt`` moves with each renewal the provider
reports, so the lifetime the background checks pace themselves by is the served certificate's.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import TYPE_CHECKING, Any

import attrs

from core import lifetimes
from core.certificates import events
from core.certificates import idempotency as idem
from core.certificates.states import Classified
from core.domains import operations
from core.domains.drift import drift_ops_status
from core.edge import ProviderState
from core.edge.words import provider_words
from core.errors import NotFound
from core.wire import dumps, format_timestamp
from store.records import DEFAULT_ISSUER, Certificate, DomainRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)

FAILED = Classified("error", "error")
#: What the message of an expired certificate tells an API client to do; the portal says its own words.
DIAGNOSE_THEN_ISSUE = "check the delegation CNAME (GET /v1/domains/:id/diagnosis), then issue again"


@attrs.frozen
class IssuanceSummary:
    certificate_id: uuid.UUID
    status: str
    message: str
    next_renewal_at: dt.datetime | None = None


def summary_of(certificate: Certificate, message: str, row: DomainRow | None = None) -> IssuanceSummary:
    """``row``: the certificate's domain, whose ``nextRenewalAt`` is the certificate's when it is the
    latest; without it, two thirds into the life the certificate record knows."""
    planned = row.cert_next_renewal_at if row is not None else lifetimes.planned_renewal(
        certificate.not_after, not_before=certificate.not_before)
    return IssuanceSummary(
        certificate_id=certificate.id,
        status=certificate.status,
        message=message,
        next_renewal_at=planned,
    )



def store(
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
    answered: bool = False,
) -> IssuanceSummary:
    """One transaction: Certificate, Domain summary, event (new requests), idempotency record.

    ``answered``: with no ``state``, the provider's refusal: it was asked, and its answer is as
    good as a check (``last_checked_at``). A failure with neither was stopped by the service's own
    checks before anything was asked (core/certificates/states.py, ``stopped_before_provider``).
    """
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
            classified = FAILED  # never shown as active past its expiry
            message = (f"The certificate expired on {state.expires_at:%Y-%m-%d %H:%M} UTC and {provider_words(services.config.provider).issuer} "
                       f"has not renewed it; {DIAGNOSE_THEN_ISSUE}.")
        updated = _apply(base, state, classified, message, now, answered=answered)
        announce = events.to_announce(services, base, updated, new_request=new_request)
        if announce is not None:
            updated = attrs.evolve(updated, announced=(*updated.announced, announce))
        beyond = _beyond_spec(services, base, updated, state)
        if any(kind == events.RENEWAL_OVERDUE for kind, _ in beyond):  # once per certificate
            updated = attrs.evolve(updated, overdue_announced_for=updated.provider_certificate_id)
        if existing is None:
            store.certificates.insert(updated)
        else:
            store.certificates.update(updated)
        # A refresh of an older certificate must not overwrite the summary of the latest one.
        if certificate is None or latest is None or latest.id == updated.id:
            became_active = updated.status == "active" and base.not_before is None
            row = _domain_with(row, updated, state, classified, message, trace_id, now, became_active)
            store.domains.update(row)
            summary = summary_of(updated, message, row)
        else:  # an older certificate: its own renewal time, as the provider reports it
            summary = summary_of(updated, message) if state is None else IssuanceSummary(
                updated.id, updated.status, message, lifetimes.planned_renewal(
                    updated.not_after, not_before=state.issued_at or updated.not_before, renew_at=state.renew_at))
        if announce is not None:
            events.record(services, updated, announce)
        for kind, extra in beyond:
            events.record(services, updated, kind, extra)
        if claim is not None:
            idem.complete(services, claim, status_code=200, body=dumps(summary))
    log.info("certificate %s of %s: %s / %s (trace %s)", updated.id, row.apex, updated.status, classified.domain, trace_id)
    return summary


def _beyond_spec(services: Services, before: Certificate, after: Certificate,
                 state: ProviderState | None) -> list[tuple[str, dict[str, Any]]]:
    """The events beyond the spec's that storing ``after`` queues (core/certificates/events.py):
    ``cert.chain_changed`` for a renewal from another intermediate, ``cert.renewal_overdue`` for a
    certificate past two thirds of its life without a successor. Only in ``"transitions"`` mode."""
    if state is None or services.config.lifecycle.events != "transitions":
        return []
    found: list[tuple[str, dict[str, Any]]] = []
    if events.chain_changed(before, after):
        found.append((events.CHAIN_CHANGED, {"issuer": after.issuer, "previousIssuer": before.issuer}))
    if events.overdue(services, after, state.issued_at, state.expires_at):
        assert state.issued_at is not None and state.expires_at is not None
        since = state.issued_at + (state.expires_at - state.issued_at) * events.OVERDUE_AFTER
        found.append((events.RENEWAL_OVERDUE, {"issuer": after.issuer, "issuedAt": format_timestamp(state.issued_at),
                                               "overdueSince": format_timestamp(since),
                                               "notAfter": format_timestamp(state.expires_at)}))
    return found


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


def _apply(base: Certificate, state: ProviderState | None, classified: Classified, message: str, now: dt.datetime, *,
           answered: bool = False) -> Certificate:
    certificate = attrs.evolve(
        base,
        status=classified.certificate,
        not_before=base.not_before or (now if classified.certificate == "active" else None),
        last_error=message if classified.certificate == "error" else None,
    )
    if state is None:
        return attrs.evolve(certificate, last_checked_at=now) if answered else certificate
    renewed = attrs.evolve(
        certificate,
        issuer=state.issuer or base.issuer,
        not_after=state.expires_at or base.not_after,
        provider_certificate_id=state.certificate_id or base.provider_certificate_id,
        provider_hostname_id=state.hostname_id,
        provider_ssl_id=state.ssl_id or base.provider_ssl_id,
        provider_status=state.ssl_status,
        provider_hostname_status=state.hostname_status,
        # The issued certificate's: a successor under the CA's default profile names none.
        profile=state.profile if state.certificate_id else base.profile,
        last_checked_at=now,
    )
    if renewed.provider_certificate_id == base.provider_certificate_id:
        return renewed
    # Another certificate: the issuer it replaced is kept when it differs, forgotten when it does not.
    return attrs.evolve(renewed, previous_issuer=base.issuer if events.chain_changed(base, renewed) else None)


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
    renew_at = state.renew_at if state is not None else row.cert_renew_at
    last_issued_at = _last_issued(row, certificate, state, now, became_active)
    return attrs.evolve(
        row,
        cert_status=classified.domain,
        cert_issuer=certificate.issuer if certificate.issuer != DEFAULT_ISSUER else None,
        cert_previous_issuer=certificate.previous_issuer,
        cert_not_after=certificate.not_after,
        cert_next_renewal_at=lifetimes.planned_renewal(certificate.not_after, not_before=last_issued_at,
                                                       renew_at=renew_at),
        cert_renew_at=renew_at,
        cert_last_issued_at=last_issued_at,
        cert_error=message if failed else None,
        cert_trace_id=trace_id,
        ops_status=drift_ops_status(row.validation_status, classified.domain, row.drift),
        # The provider's own statement of the delegation target wins over the one we derived.
        delegation_target=(state and state.delegation_target) or row.delegation_target,
        updated_at=now,
    )


def _last_issued(row: DomainRow, certificate: Certificate, state: ProviderState | None, now: dt.datetime,
                 became_active: bool) -> dt.datetime | None:
    """When the certificate served was issued: the provider's word (a renewal it reports moves it),
    else the moment the service first found it active."""
    issued = state.issued_at if state is not None and certificate.status == "active" else None
    return issued or (now if became_active else row.cert_last_issued_at)


def note_failure(services: Services, workspace: Workspace, domain_id: uuid.UUID, *, message: str, trace_id: uuid.UUID) -> None:
    """No result from the provider: only the Domain's error state records the attempt."""
    with services.store.transaction():
        row = services.store.domains.get(workspace.id, domain_id)
        if row is not None:
            services.store.domains.update(
                attrs.evolve(row, cert_error=message, cert_trace_id=trace_id, updated_at=services.clock.now())
            )
    log.warning("edge provider gave no result for domain %s: %s (trace %s)", domain_id, message, trace_id)
