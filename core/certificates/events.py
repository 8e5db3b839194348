"""Events about certificates, written to the outbox in the caller's transaction.

Exactly one event is written when the result of a new issuance request is stored; refreshes and
DNS checks write none (spec, Events), unless ``[lifecycle] events = "transitions"``: then a refresh
that first sees a certificate become active or fail queues ``cert.issued`` or ``cert.issue_failed``,
once per certificate, and never one its issuance already queued (``Certificate.announced``). That
mode also announces drift, from ``core/domains/drift.py``, and two changes a refresh reads (the
background checks read every active certificate):

- ``cert.chain_changed``: a renewal came from another intermediate than the certificate it
  replaces (the CA picks one per issuance: a chain pinned or cached elsewhere breaks). Once per
  renewal: the next read finds the same issuer.
- ``cert.renewal_overdue``: the certificate served has passed two thirds of its life and no
  successor was issued: the only expiry notice an operator gets now that CAs send no expiry mail.
  Once per certificate (``Certificate.overdue_announced_for``); its successor may be in its turn.
Webhook delivery reads the outbox later, so a crash can delay an event, never lose it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

from store.records import DEFAULT_ISSUER, Certificate, OutboxEvent

if TYPE_CHECKING:
    from core.services import Services

ISSUED = "cert.issued"
ISSUE_PENDING = "cert.issue_pending"
ISSUE_FAILED = "cert.issue_failed"
TYPES = (ISSUED, ISSUE_PENDING, ISSUE_FAILED)
CHAIN_CHANGED = "cert.chain_changed"
RENEWAL_OVERDUE = "cert.renewal_overdue"
#: Sent only with ``[lifecycle] events = "transitions"``, beyond the spec's three.
TRANSITION_TYPES = (CHAIN_CHANGED, RENEWAL_OVERDUE)
#: The part of its life after which a certificate without a successor is overdue (renewals happen
#: at two thirds at the latest: core/acme/orders.py ``renewal_due``).
OVERDUE_AFTER = 2 / 3
_BY_STATUS = {"active": ISSUED, "pending": ISSUE_PENDING, "error": ISSUE_FAILED}


def to_announce(services: Services, before: Certificate, after: Certificate, *, new_request: bool) -> str | None:
    """The event type storing ``after`` (once ``before``) queues, if any."""
    if new_request:
        return _BY_STATUS[after.status]
    moved = after.status != before.status and after.status in ("active", "error")
    if services.config.lifecycle.events == "transitions" and moved and _BY_STATUS[after.status] not in before.announced:
        return _BY_STATUS[after.status]
    return None


def chain_changed(before: Certificate, after: Certificate) -> bool:
    """Whether storing ``after`` stores a renewal issued by another intermediate than ``before``:
    the provider's certificate changed, both issuers are known, and they differ. Every mode records
    it (``previous_issuer``); only ``"transitions"`` queues ``CHAIN_CHANGED``."""
    return (before.provider_certificate_id is not None and after.provider_certificate_id is not None
            and after.provider_certificate_id != before.provider_certificate_id
            and DEFAULT_ISSUER not in (before.issuer, after.issuer) and after.issuer != before.issuer)


def overdue(services: Services, certificate: Certificate, issued_at: dt.datetime | None,
            expires_at: dt.datetime | None) -> bool:
    """Whether ``RENEWAL_OVERDUE`` is queued for ``certificate`` as just read: ``"transitions"``
    mode, the certificate active, past ``OVERDUE_AFTER`` of its life (``issued_at`` to
    ``expires_at``, as the provider reports it), and not announced yet for this certificate."""
    if services.config.lifecycle.events != "transitions" or certificate.status != "active":
        return False
    if issued_at is None or expires_at is None or certificate.provider_certificate_id is None:
        return False
    if certificate.overdue_announced_for == certificate.provider_certificate_id:
        return False
    return services.clock.now() >= issued_at + (expires_at - issued_at) * OVERDUE_AFTER


def record(services: Services, certificate: Certificate, event_type: str,
           extra: dict[str, Any] | None = None) -> OutboxEvent:
    """Queue ``event_type`` for a stored certificate; call inside the storing transaction. ``extra``:
    what an event beyond the spec's adds to the spec's flat summary."""
    event = OutboxEvent(
        id=uuid.uuid4(),
        workspace_id=certificate.workspace_id,
        type=event_type,
        data={
            "domainId": str(certificate.domain_id),
            "apex": certificate.apex,
            "certificateId": str(certificate.id),
            "status": certificate.status,
            "provider": certificate.provider,
            **(extra or {}),
        },
        created_at=services.clock.now(),
    )
    services.store.outbox.insert(event)
    return event
