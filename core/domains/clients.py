"""Clients: the workspace's own customers, that domains can be filed under (``clientId``)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import attrs

from core.errors import Conflict, NotFound, ValidationError
from store.records import Client, Workspace

if TYPE_CHECKING:
    from core.services import Services

NAME_MAX = 200
NOTES_MAX = 2000


@attrs.frozen
class CreateClient:
    name: str
    notes: str | None = None


@attrs.frozen
class PatchClient:
    name: str | None = None
    notes: str | None = None


def _clean(name: str | None, notes: str | None) -> tuple[str | None, str | None]:
    errors: dict[str, list[str]] = {}
    if name is not None:
        name = name.strip()
        if not 1 <= len(name) <= NAME_MAX:
            errors["name"] = [f"Must be 1 to {NAME_MAX} characters"]
    if notes is not None and len(notes) > NOTES_MAX:
        errors["notes"] = [f"Must be at most {NOTES_MAX} characters"]
    if errors:
        raise ValidationError(field_errors=errors)
    return name, notes


def load(services: Services, workspace: Workspace, client_id: uuid.UUID) -> Client:
    client = services.store.clients.get(workspace.id, client_id)
    if client is None:
        raise NotFound("Client not found.")
    return client


def list_clients(services: Services, *, workspace: Workspace) -> list[Client]:
    return services.store.clients.list(workspace.id)


def create(services: Services, *, workspace: Workspace, request: CreateClient) -> Client:
    name, notes = _clean(request.name, request.notes)
    now = services.clock.now()
    client = Client(id=uuid.uuid4(), workspace_id=workspace.id, name=name or "", notes=notes or None, created_at=now, updated_at=now)
    with services.store.transaction():
        services.store.clients.insert(client)
    return client


def patch(services: Services, *, workspace: Workspace, client_id: uuid.UUID, request: PatchClient) -> Client:
    """Change the name and/or notes; an empty notes string clears them."""
    name, notes = _clean(request.name, request.notes)
    with services.store.transaction():
        client = load(services, workspace, client_id)
        if name is None and notes is None:
            return client
        client = attrs.evolve(
            client,
            name=name if name is not None else client.name,
            notes=(notes or None) if notes is not None else client.notes,
            updated_at=services.clock.now(),
        )
        services.store.clients.update(client)
    return client


def delete(services: Services, *, workspace: Workspace, client_id: uuid.UUID) -> None:
    """Refused while domains refer to the client, so no domain is left pointing at nothing."""
    with services.store.transaction():
        client = load(services, workspace, client_id)
        in_use = services.store.clients.domain_count(client.id)
        if in_use:
            raise Conflict(
                "client_in_use",
                f"The client still has {in_use} domain(s); delete them or file them elsewhere first.",
            )
        services.store.clients.delete(workspace.id, client.id)
