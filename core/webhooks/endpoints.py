"""Webhook endpoints: registration rules, the shown-once ``whsec_`` secret, rotation.

A URL must be a public HTTPS URL: the outbound guard (``core/outbound/guard.py``) checks its form and what
its host resolves to now, and checks again at every send, since DNS changes. The secret is
stored encrypted (AES-GCM under a subkey of the secret key file, bound to the endpoint's id): a
copy of the database alone reveals none, and it is shown only when created or rotated.

The plain functions that read or write are units of work, called with ``await store.run(...)``;
``create`` and ``patch`` check the URL (DNS) between their units, never inside one.
"""

from __future__ import annotations

import secrets
import uuid
from typing import TYPE_CHECKING

import attrs

from core.errors import Conflict, NotFound, ValidationError
from core.outbound.guard import DestinationRefused
from core.text import printable
from store.records import WebhookEndpoint

if TYPE_CHECKING:
    from core.services import Services

SECRET_PREFIX = "whsec_"
_SECRET_PURPOSE = "webhook-secret"
EVENTS_MAX = 50
ENDPOINTS_MAX = 20
EVENT_NAME_MAX = 100
URL_MAX = 2048
STATUSES = ("active", "disabled")


@attrs.frozen
class CreateWebhook:
    url: str
    events: list[str] | None = None


@attrs.frozen
class PatchWebhook:
    url: str | None = None
    events: list[str] | None = None
    status: str | None = None


def subscribed(endpoint: WebhookEndpoint, event_type: str) -> bool:
    """Empty ``events``, or ``*`` among them, subscribes to everything (spec)."""
    return not endpoint.events or "*" in endpoint.events or event_type in endpoint.events


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def secret_of(services: Services, endpoint: WebhookEndpoint) -> str:
    """The endpoint's current secret, decrypted for signing."""
    return services.keyring.decrypt(_SECRET_PURPOSE, endpoint.secret_ciphertext, bound_to=str(endpoint.id))


def _sealed(services: Services, endpoint_id: uuid.UUID, secret: str) -> str:
    return services.keyring.encrypt(_SECRET_PURPOSE, secret, bound_to=str(endpoint_id))


def _clean_events(events: list[str] | None, errors: dict[str, list[str]]) -> list[str]:
    cleaned: list[str] = []
    for raw in events or []:
        name = printable(raw)
        if not name or len(name) > EVENT_NAME_MAX:
            errors.setdefault("events", []).append(f"Each event name must be 1 to {EVENT_NAME_MAX} printable characters")
            break
        if name not in cleaned:
            cleaned.append(name)
    if len(cleaned) > EVENTS_MAX:
        errors.setdefault("events", []).append(f"At most {EVENTS_MAX} event names")
    return cleaned


async def _checked_url(services: Services, url: str) -> str:
    """The normalised URL, or a 400 naming why it may not be used."""
    if len(url) > URL_MAX:
        raise ValidationError.field("url", f"Must be at most {URL_MAX} characters")
    try:
        target = await services.outbound.check_destination(url)
    except DestinationRefused as exc:
        raise ValidationError.field("url", exc.reason) from None
    return target.url


def load(services: Services, workspace_id: uuid.UUID, endpoint_id: uuid.UUID) -> WebhookEndpoint:
    endpoint = services.store.webhooks.get_endpoint(workspace_id, endpoint_id)
    if endpoint is None:
        raise NotFound("Webhook endpoint not found.")
    return endpoint


def list_endpoints(services: Services, *, workspace_id: uuid.UUID) -> list[WebhookEndpoint]:
    return services.store.webhooks.endpoints(workspace_id)


async def create(services: Services, *, workspace_id: uuid.UUID, request: CreateWebhook) -> tuple[WebhookEndpoint, str]:
    """A new active endpoint and its secret (to be shown once)."""
    errors: dict[str, list[str]] = {}
    events = _clean_events(request.events, errors)
    if errors:
        raise ValidationError(field_errors=errors)
    await services.store.run(_room_for_one, services, workspace_id)
    url = await _checked_url(services, request.url)
    now = services.clock.now()
    endpoint_id = uuid.uuid4()
    secret = new_secret()
    endpoint = WebhookEndpoint(
        id=endpoint_id, workspace_id=workspace_id, url=url, events=events, status="active",
        secret_ciphertext=_sealed(services, endpoint_id, secret), created_at=now, updated_at=now,
    )
    await services.store.run(_insert, services, endpoint)
    return endpoint, secret


def _room_for_one(services: Services, workspace_id: uuid.UUID) -> None:
    if len(services.store.webhooks.endpoints(workspace_id)) >= ENDPOINTS_MAX:
        # Every event fans out to every endpoint: the number a workspace can ask for is bounded.
        raise Conflict("too_many_webhooks", f"A workspace may register at most {ENDPOINTS_MAX} webhook endpoints; delete one first.")


def _insert(services: Services, endpoint: WebhookEndpoint) -> None:
    with services.store.transaction():
        services.store.webhooks.insert_endpoint(endpoint)


async def patch(
    services: Services, *, workspace_id: uuid.UUID, endpoint_id: uuid.UUID, request: PatchWebhook
) -> WebhookEndpoint:
    """Change the URL (checked again), the events or the status; a disabled endpoint keeps its
    queued deliveries, which resume when it is enabled again."""
    errors: dict[str, list[str]] = {}
    events = _clean_events(request.events, errors) if request.events is not None else None
    if request.status is not None and request.status not in STATUSES:
        errors.setdefault("status", []).append(f"Must be one of: {', '.join(STATUSES)} (got '{request.status}')")
    if errors:
        raise ValidationError(field_errors=errors)
    await services.store.run(load, services, workspace_id, endpoint_id)  # 404 before any DNS lookup
    url = await _checked_url(services, request.url) if request.url is not None else None
    return await services.store.run(_patched, services, workspace_id, endpoint_id, url=url, events=events,
                                    status=request.status)


def _patched(services: Services, workspace_id: uuid.UUID, endpoint_id: uuid.UUID, *, url: str | None,
             events: list[str] | None, status: str | None) -> WebhookEndpoint:
    with services.store.transaction():
        current = load(services, workspace_id, endpoint_id)
        updated = attrs.evolve(
            current,
            url=url if url is not None else current.url,
            events=events if events is not None else current.events,
            status=status or current.status,
            updated_at=services.clock.now(),
        )
        services.store.webhooks.update_endpoint(updated)
    return updated


def delete(services: Services, *, workspace_id: uuid.UUID, endpoint_id: uuid.UUID) -> None:
    """Remove the endpoint and every delivery queued for it."""
    with services.store.transaction():
        if not services.store.webhooks.delete_endpoint(workspace_id, endpoint_id):
            raise NotFound("Webhook endpoint not found.")


def rotate(services: Services, *, workspace_id: uuid.UUID, endpoint_id: uuid.UUID) -> tuple[WebhookEndpoint, str]:
    """A new secret at once: every attempt from now on is signed with it."""
    secret = new_secret()
    with services.store.transaction():
        current = load(services, workspace_id, endpoint_id)
        updated = attrs.evolve(
            current, secret_ciphertext=_sealed(services, current.id, secret), updated_at=services.clock.now()
        )
        services.store.webhooks.update_endpoint(updated)
    return updated, secret
