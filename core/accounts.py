"""Workspaces, users and memberships: who belongs where, with which role."""

from __future__ import annotations

import secrets
import uuid
from typing import TYPE_CHECKING, Any

from core.errors import Forbidden
from store.records import Membership, User, Workspace

if TYPE_CHECKING:
    from core.services import Services


def normalise_email(email: str) -> str:
    """E-mail addresses compare case-insensitively here (providers differ on the local part)."""
    return email.strip().lower()


def _user_for(services: Services, email: str) -> User:
    """The user with this e-mail, created (not yet bound to any identity) when unknown."""
    user = services.store.accounts.user_by_email(normalise_email(email))
    if user is None:
        user = User(id=uuid.uuid4(), email=normalise_email(email), created_at=services.clock.now())
        services.store.accounts.insert_user(user)
    return user


def create_workspace(services: Services, *, name: str, owner_email: str) -> tuple[Workspace, User]:
    """A new workspace whose owner is the user with this e-mail (created when unknown)."""
    now = services.clock.now()
    store = services.store
    with store.transaction():
        user = _user_for(services, owner_email)
        workspace = Workspace(id=uuid.uuid4(), name=name, created_at=now, ownership_token=secrets.token_hex(16))
        store.accounts.insert_workspace(workspace)
        store.accounts.insert_membership(
            Membership(workspace_id=workspace.id, user_id=user.id, role="owner", created_at=now)
        )
    return workspace, user


def add_member(services: Services, *, workspace_id: uuid.UUID, email: str, role: str) -> User:
    """Give the user with this e-mail (created when unknown) a role in a workspace."""
    with services.store.transaction():
        user = _user_for(services, email)
        services.store.accounts.insert_membership(
            Membership(workspace_id=workspace_id, user_id=user.id, role=role, created_at=services.clock.now())
        )
    return user


def session_member(services: Services, claims: dict[str, Any]) -> tuple[User, Membership]:
    """The user and membership behind verified ID-token claims.

    A user is recognised by issuer + subject. A user known only by e-mail (created at sign-up or
    by an invitation) is bound to the identity at the first sign-in with that verified e-mail.
    """
    store = services.store
    issuer, subject = claims["iss"], claims["sub"]
    user = store.accounts.user_by_subject(issuer, subject)
    if user is None:
        with store.transaction():
            known = store.accounts.user_by_email(normalise_email(claims["email"]))
            if known is not None and known.subject is None:
                store.accounts.link_user(known.id, issuer=issuer, subject=subject)
                user = store.accounts.user_by_subject(issuer, subject)
    memberships = store.accounts.memberships_of_user(user.id) if user else []
    if user is None or not memberships:
        raise Forbidden(
            "This account belongs to no workspace: sign up, or ask a workspace owner to invite you."
        )
    return user, memberships[0]
