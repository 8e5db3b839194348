"""Events about certificates, written to the outbox in the caller's transaction.

Exactly one event is written when the result of a new issuance request is stored; refreshes and
DNS checks write none (spec, Events), unless ``[lifecycle] events = "transitions"``: then a refresh
that first sees a certificate become active or fail queues ``cert.issued`` or ``cert.issue_failed``,
once per certificate, and never one its issuance already queued (``Certificate.announced``). That
mode also announces drift, from ``core/domains/drift.py``.
Webhook delivery reads the outbox later, so a crash can delay an event, never lose it.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from store.records import Certificate, OutboxEvent

if TYPE_CHECKING:
    from core.services import Services

ISSUED = "cert.issued"
ISSUE_PENDING = "cert.issue_pending"
ISSUE_FAILED = "cert.issue_failed"
TYPES = (ISSUED, ISSUE_PENDING, ISSUE_FAILED)
_BY_STATUS = {"active": ISSUED, "pending": ISSUE_PENDING, "error": ISSUE_FAILED}


def to_announce(services: Services, before: Certificate, after: Certificate, *, new_request: bool) -> str | None:
    """The event type storing ``after`` (once ``before``) queues, if any."""
    if new_request:
        return _BY_STATUS[after.status]
    moved = after.status != before.status and after.status in ("active", "error")
    if services.config.lifecycle.events == "transitions" and moved and _BY_STATUS[after.status] not in before.announced:
        return _BY_STATUS[after.status]
    return None


def record(services: Services, certificate: Certificate, event_type: str) -> OutboxEvent:
    """Queue ``event_type`` for a stored certificate; call inside the storing transaction."""
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
        },
        created_at=services.clock.now(),
    )
    services.store.outbox.insert(event)
    return event
