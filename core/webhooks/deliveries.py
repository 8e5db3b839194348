"""The delivery log of an endpoint and redelivery (beyond the spec; every webhook product has them).

Deliveries are listed newest first with keyset cursors like the queries; one delivery shows every
attempt (time, status code or error, duration). Redelivering queues the same delivery (same
``id``, so receivers still deduplicate) for an immediate new round of attempts.

Each function here is a unit of work, called with ``await store.run(...)``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import attrs

from core import cursors
from core.errors import NotFound
from core.webhooks.endpoints import load
from core.wire import dump
from store.records import WebhookDelivery

if TYPE_CHECKING:
    from core.services import Services

LIMIT_DEFAULT = 50
LIMIT_MAX = 250


@attrs.frozen
class DeliveryPage:
    items: list[WebhookDelivery]
    total: int
    next_cursor: str | None = None


def list_deliveries(
    services: Services, *, workspace_id: uuid.UUID, endpoint_id: uuid.UUID, limit: str | None, cursor: str | None
) -> DeliveryPage:
    size = cursors.page_size(limit, default=LIMIT_DEFAULT, maximum=LIMIT_MAX)
    load(services, workspace_id, endpoint_id)
    bound_to = cursors.binding(str(workspace_id), "webhook-deliveries", str(endpoint_id))
    after = cursors.decode(services.keyring, cursor, bound_to) if cursor is not None else None
    repo = services.store.webhooks
    rows = repo.deliveries(endpoint_id, after=after, limit=size + 1)
    next_cursor = None
    if len(rows) > size:
        rows = rows[:size]
        next_cursor = cursors.encode(services.keyring, bound_to, repo.page_key(rows[-1]))
    return DeliveryPage(items=rows, total=repo.count_deliveries(endpoint_id), next_cursor=next_cursor)


def _load_delivery(services: Services, workspace_id: uuid.UUID, endpoint_id: uuid.UUID, delivery_id: uuid.UUID) -> WebhookDelivery:
    load(services, workspace_id, endpoint_id)
    delivery = services.store.webhooks.get_delivery(endpoint_id, delivery_id)
    if delivery is None:
        raise NotFound("Delivery not found.")
    return delivery


def detail(services: Services, *, workspace_id: uuid.UUID, endpoint_id: uuid.UUID, delivery_id: uuid.UUID) -> dict[str, Any]:
    """One delivery with every attempt, oldest first."""
    delivery = _load_delivery(services, workspace_id, endpoint_id, delivery_id)
    return {**dump(delivery), "attempts": dump(services.store.webhooks.attempts(delivery_id))}


def redeliver(services: Services, *, workspace_id: uuid.UUID, endpoint_id: uuid.UUID, delivery_id: uuid.UUID) -> WebhookDelivery:
    """Queue the delivery again now, for a new round of up to ``max_attempts`` attempts."""
    with services.store.transaction():
        delivery = _load_delivery(services, workspace_id, endpoint_id, delivery_id)
        queued = attrs.evolve(delivery, status="pending", attempt_count=0, next_attempt_at=services.clock.now())
        services.store.webhooks.update_delivery(queued)
    services.store.outbox.notify()
    return queued
