"""Workspaces, users and memberships: who belongs where, with which role."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from core.errors import Forbidden, NotFound
from core.text import normalise_email
from store.records import Membership, User, Workspace

if TYPE_CHECKING:
    from core.identity.auth import Principal
    from core.services import Services


@attrs.frozen
class Session:
    """What ``GET /v1/auth/session`` shows."""

    user_email: str
    org: Workspace


def session_of(services: Services, principal: Principal) -> Session:
    """A person's session; an API key acts for its workspace and reports the first owner."""
    if principal.user is not None:
        email = principal.user.email
    else:
        email = services.store.accounts.owner_email(principal.workspace_id) or ""
    return Session(user_email=email, org=principal.workspace)


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


NO_ACCOUNT = "This account belongs to no workspace: sign up, or ask a workspace owner to invite you."


def person(services: Services, claims: dict[str, Any]) -> User:
    """The user behind verified ID-token claims, bound to that identity on first sign-in.

    A user is recognised by issuer + subject. A user known only by e-mail (an owner created at
    sign-up, a member added by an operator, or one the operator unbound with ``rebind-user``) is
    bound at the first sign-in with that verified e-mail. Someone unknown with a pending
    invitation becomes a user (with no workspace until they accept one). Anyone else is refused.
    """
    store = services.store
    issuer, subject = claims["iss"], claims["sub"]
    user = store.accounts.user_by_subject(issuer, subject)
    if user is not None:
        return user
    email = normalise_email(claims["email"])
    with store.transaction():
        known = store.accounts.user_by_email(email)
        if known is not None and known.subject is None:
            store.accounts.link_user(known.id, issuer=issuer, subject=subject)
        elif known is None and store.team.invitations_for_email(email):
            store.accounts.insert_user(
                User(id=uuid.uuid4(), email=email, issuer=issuer, subject=subject, created_at=services.clock.now())
            )
        user = store.accounts.user_by_subject(issuer, subject)
    if user is None:
        # Unknown, or this e-mail is bound to another identity (another issuer: see rebind-user).
        raise Forbidden(NO_ACCOUNT)
    return user


def joined(services: Services, user: User) -> list[tuple[Membership, Workspace]]:
    """The user's memberships with their workspaces, the one joined first first."""
    return services.store.accounts.joined(user.id)


def membership_in(
    memberships: Sequence[tuple[Membership, Workspace]], workspace_id: uuid.UUID | None, *, invited: bool
) -> tuple[Membership, Workspace]:
    """The membership a request acts in: in the workspace it names, or the one joined first.
    ``invited``: whether someone in no workspace has an invitation waiting (what their 403 says)."""
    if workspace_id is not None:
        for membership, workspace in memberships:
            if membership.workspace_id == workspace_id:
                return membership, workspace
        raise NotFound("Workspace not found.")
    if not memberships:
        if invited:
            raise Forbidden("You belong to no workspace yet: accept an invitation (GET /v1/invitations) or sign up.")
        raise Forbidden(NO_ACCOUNT)
    return memberships[0]
