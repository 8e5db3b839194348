"""Issuance and refresh: ask the edge provider, then store what it said in one transaction.

The network comes first and no transaction, nor unit of work (``store.run``), is held across it:
the reads before it are one unit, the storing after it another. What the provider answered is
stored at once: the Certificate, the Domain's ``cert`` summary and ``opsStatus``, the outbox event
of a new issuance request and the Idempotency-Key's response commit together or not at all.

- A new issuance request (issue, or verification of a domain without a usable certificate) runs
  the CAA pre-flight, asks the provider, stores its answer as reported (a timed-out validation is
  ``error``, spec: States and transitions) and queues exactly one event.
- Validating again (Cloudflare: a PATCH) is asked only for a certificate already stored as failed
  in a state that can fix (``states.revalidation_can_fix``), by a later DNS check that finds both
  records. Asking is a new issuance request too (``validate_again``).
- A refresh reads the provider's current state and stores it; it queues no event.
- When the provider gives no result (unreachable, 5xx, our request budget spent), nothing but
  the Domain's ``cert.lastError`` and ``traceId`` is written, and the caller gets the error.

The storing itself is core/certificates/results.py.

Each provider interaction has a ``traceId``: in the log lines of the adapter and on the Domain. Its
calls are the workspace's (``_for``): no workspace spends more than its share of the provider's
request budget, which grows with its hostnames verified and serving (core/edge/pacing.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import uuid
from typing import TYPE_CHECKING

import attrs

from core.certificates import idempotency as idem
from core.certificates import results
from core.certificates.results import IssuanceSummary
from core.certificates.states import classify, describe, revalidation_can_fix
from core.dns import caa
from core.domains import operations
from core.edge import HostnameGone, ProviderRejected, ProviderState, ProviderUnavailable
from core.edge.pacing import for_workspace
from core.edge.words import ProviderWords, provider_words
from core.errors import Conflict, NotFound, WildcardNotSupported
from core.wire import dumps
from store.records import Certificate, DomainRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)


def _for(services: Services, workspace: Workspace) -> contextlib.AbstractContextManager[None]:
    """The provider calls made inside are ``workspace``'s. What grows its share of the provider's
    budget (counted only if its share is asked): its hostnames verified and serving a certificate
    with nothing drifted (opsStatus ``active``) that was issued long enough ago. Each is a name its
    owner controls and that the provider validated and issued for: costly to multiply, unlike sign-ups."""
    async def active_hostnames(seconds: float, at_most: int) -> int:
        issued_before = services.clock.now() - dt.timedelta(seconds=seconds)
        return await services.store.run(services.store.domains.serving, workspace.id, issued_before=issued_before,
                                        at_most=at_most)
    return for_workspace(workspace.id, active_hostnames)


@attrs.frozen
class IssueRequest:
    """The optional issue body: only ``wildcard: false`` is supported; ``ca`` and ``chain`` are
    accepted for adapter compatibility and never sent to the provider."""

    wildcard: bool | None = None
    ca: str | None = None
    chain: str | None = None


@attrs.frozen
class IssueOutcome:
    body: str
    "The summary's JSON, as first answered (a replay answers the stored text)."
    replayed: bool


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
        summary = results.summary_of(latest, "The certificate is already active; call refresh for the provider's latest state.",
                                     row)
        if claim is not None:
            idem.complete(services, claim, status_code=200, body=dumps(summary))
        return summary


async def request_issuance(services: Services, workspace: Workspace, row: DomainRow, *,
                           claim: idem.Claim | None = None) -> IssuanceSummary:
    """A new issuance request to the provider, its answer stored as reported with exactly one event."""
    trace_id = uuid.uuid4()
    verdict = await caa.preflight(services.dns, row.apex, await services.provider.caa_issuers())
    if not verdict.allowed:
        log.info("issuance of %s stopped by the CAA pre-flight (trace %s)", row.apex, trace_id)
        return await services.store.run(results.store, services, workspace, row.id, trace_id=trace_id, state=None,
                                         classified=results.FAILED, message=verdict.message or "", new_request=True, claim=claim)
    try:
        with _for(services, workspace):
            state = await services.provider.issue(row.apex, trace_id=trace_id)
    except ProviderRejected as exc:
        return await services.store.run(results.store, services, workspace, row.id, trace_id=trace_id, state=None,
                                         classified=results.FAILED, message=exc.message, new_request=True, claim=claim,
                                         answered=exc.asked)
    except ProviderUnavailable as exc:
        await services.store.run(results.note_failure, services, workspace, row.id, message=exc.message, trace_id=trace_id)
        raise
    return await services.store.run(_store_requested, services, workspace, row.id, trace_id=trace_id, state=state,
                                     caa_message=verdict.message, claim=claim)


async def validate_again(services: Services, workspace: Workspace, row: DomainRow, failed: Certificate) -> IssuanceSummary:
    """Ask the provider to validate the hostname of ``failed`` (``states.revalidation_can_fix``)
    again, for a DNS check that has just found both records: a new issuance request, its answer
    stored with one event. When the hostname has left that failure meanwhile, nothing is asked and
    what was read is stored as a refresh (no event); one the provider no longer has gets a new request.
    No CAA pre-flight: the provider checks CAA as it validates, and says so (Cloudflare: ``caa_error``).
    """
    assert failed.provider_hostname_id is not None  # as revalidation_can_fix says
    trace_id = uuid.uuid4()
    try:
        with _for(services, workspace):
            state = await services.provider.revalidate(failed.provider_hostname_id, apex=row.apex, trace_id=trace_id)
    except HostnameGone:
        return await request_issuance(services, workspace, row)
    except ProviderRejected as exc:
        return await services.store.run(results.store, services, workspace, row.id, trace_id=trace_id, state=None,
                                         classified=results.FAILED, message=exc.message, new_request=True,
                                         answered=exc.asked)
    except ProviderUnavailable as exc:
        await services.store.run(results.note_failure, services, workspace, row.id, message=exc.message, trace_id=trace_id)
        raise
    if state.revalidated:
        return await services.store.run(_store_requested, services, workspace, row.id, trace_id=trace_id, state=state,
                                         caa_message=None, claim=None)
    return await _store_read(services, workspace, failed, state, trace_id)


def _store_requested(
    services: Services, workspace: Workspace, domain_id: uuid.UUID, *, trace_id: uuid.UUID, state: ProviderState,
    caa_message: str | None, claim: idem.Claim | None,
) -> IssuanceSummary:
    """The provider's answer to a new request, classified against the domain's latest certificate."""
    latest = services.store.certificates.latest(workspace.id, domain_id)
    # Asking again for a hostname whose certificate was already active (a renewal under way).
    was_active = latest is not None and latest.provider_hostname_id == state.hostname_id and latest.not_before is not None
    classified = classify(state, was_active=was_active)
    message = " ".join(m for m in (describe(state, classified, provider_words(services.config.provider)), caa_message) if m)
    return results.store(services, workspace, domain_id, trace_id=trace_id, state=state, classified=classified,
                  message=message, new_request=True, claim=claim)


async def refresh(services: Services, *, workspace: Workspace, certificate_id: uuid.UUID) -> IssuanceSummary:
    """POST /v1/certificates/:id/refresh: the provider's current state, stored; no event."""
    certificate = await services.store.run(load_certificate, services, workspace, certificate_id)
    return await refresh_loaded(services, workspace, certificate)


async def refresh_loaded(services: Services, workspace: Workspace, certificate: Certificate) -> IssuanceSummary:
    """``refresh`` of a certificate its caller has just read (one unit of work fewer)."""
    if certificate.provider_hostname_id is None:
        return results.summary_of(certificate, certificate.last_error or
                                  f"This certificate never reached {provider_words(services.config.provider).issuer}.")
    trace_id = uuid.uuid4()
    try:
        with _for(services, workspace):
            state = await services.provider.refresh(certificate.provider_hostname_id, apex=certificate.apex, trace_id=trace_id)
    except ProviderUnavailable as exc:
        await services.store.run(results.note_failure, services, workspace, certificate.domain_id, message=exc.message,
                                 trace_id=trace_id)
        raise
    except ProviderRejected as exc:
        message = (
            _gone(provider_words(services.config.provider))
            if isinstance(exc, HostnameGone) else exc.message
        )
        return await services.store.run(results.store, services, workspace, certificate.domain_id, trace_id=trace_id, state=None,
                                         classified=results.FAILED, message=message, new_request=False, certificate=certificate,
                                         answered=exc.asked)
    return await _store_read(services, workspace, certificate, state, trace_id)


def _gone(words: ProviderWords) -> str:
    if words.acme:
        return "The service no longer holds this certificate; issue a new certificate."
    return "The edge provider no longer has this hostname; issue a new certificate."


async def _store_read(services: Services, workspace: Workspace, certificate: Certificate, state: ProviderState,
                      trace_id: uuid.UUID) -> IssuanceSummary:
    """A state read from the provider, no request made: stored on ``certificate``, with no event."""
    classified = classify(state, was_active=certificate.not_before is not None)
    return await services.store.run(results.store, services, workspace, certificate.domain_id, trace_id=trace_id, state=state,
                                     classified=classified, message=describe(state, classified, provider_words(services.config.provider)), new_request=False,
                                     certificate=certificate)


async def start_or_check(services: Services, workspace: Workspace, row: DomainRow) -> IssuanceSummary:
    """What verification does for a verified domain whose certificate is not active, once its DNS
    check found both records: a failure validating again can fix is validated again; no usable
    certificate (none yet, or one failed otherwise) gets a new request; anything else a refresh."""
    latest = await services.store.run(services.store.certificates.latest, workspace.id, row.id)
    if latest is not None and row.cert_status == "error" and revalidation_can_fix(latest):
        return await validate_again(services, workspace, row, latest)
    if latest is None or latest.provider_hostname_id is None or row.cert_status in ("none", "error"):
        return await request_issuance(services, workspace, row)
    return await refresh_loaded(services, workspace, latest)
