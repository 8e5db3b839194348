"""Events about certificates, written to the outbox in the caller's transaction.

Exactly one event is written when the result of a new issuance request is stored; refreshes and
DNS checks write none (spec, Events). Webhook delivery reads the outbox later, so a crash can
delay an event, never lose it.
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


def record_issuance_result(services: Services, certificate: Certificate) -> OutboxEvent:
    """Queue the event for a stored issuance result; call inside the storing transaction."""
    event = OutboxEvent(
        id=uuid.uuid4(),
        workspace_id=certificate.workspace_id,
        type=_BY_STATUS[certificate.status],
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
