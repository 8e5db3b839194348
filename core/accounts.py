"""Workspaces, users and memberships: who belongs where, with which role."""

from __future__ import annotations

import re
import secrets
import uuid
from typing import TYPE_CHECKING, Any

import attrs

from core.errors import Forbidden
from store.records import Invitation, Membership, User, Workspace

if TYPE_CHECKING:
    from core.auth import Principal
    from core.services import Services


_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def normalise_email(email: str) -> str:
    """E-mail addresses compare case-insensitively here (providers differ on the local part)."""
    return email.strip().lower()


def valid_email(email: str) -> bool:
    """A deliberately loose check: one @, a dot in the domain, no spaces, at most 254 characters."""
    return len(email) <= 254 and bool(_EMAIL.match(email))


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


def session_member(services: Services, claims: dict[str, Any]) -> tuple[User, Membership]:
    """The user and membership behind verified ID-token claims.

    A user is recognised by issuer + subject. A user known only by e-mail (the owner created at
    sign-up) is bound to the identity at the first sign-in with that verified e-mail; pending
    invitations for the verified e-mail become memberships at that moment.
    """
    store = services.store
    issuer, subject = claims["iss"], claims["sub"]
    email = normalise_email(claims["email"])
    user = store.accounts.user_by_subject(issuer, subject)
    invitations = store.team.invitations_for_email(email)
    if user is None or invitations:
        with store.transaction():
            if user is None:
                user = _bind_identity(services, email=email, issuer=issuer, subject=subject, invited=bool(invitations))
            if user is not None:
                _accept_invitations(services, user, invitations)
    memberships = store.accounts.memberships_of_user(user.id) if user else []
    if user is None or not memberships:
        raise Forbidden(
            "This account belongs to no workspace: sign up, or ask a workspace owner to invite you."
        )
    return user, memberships[0]


def _bind_identity(services: Services, *, email: str, issuer: str, subject: str, invited: bool) -> User | None:
    store = services.store
    known = store.accounts.user_by_email(email)
    if known is not None and known.subject is None:
        store.accounts.link_user(known.id, issuer=issuer, subject=subject)
    elif known is None and invited:
        store.accounts.insert_user(
            User(id=uuid.uuid4(), email=email, issuer=issuer, subject=subject, created_at=services.clock.now())
        )
    return store.accounts.user_by_subject(issuer, subject)


def _accept_invitations(services: Services, user: User, invitations: list[Invitation]) -> None:
    store = services.store
    joined = {m.workspace_id for m in store.accounts.memberships_of_user(user.id)}
    for invitation in invitations:
        if invitation.workspace_id not in joined:
            store.accounts.insert_membership(
                Membership(
                    workspace_id=invitation.workspace_id, user_id=user.id, role=invitation.role,
                    created_at=services.clock.now(),
                )
            )
        store.team.delete_invitation(invitation.id)
