"""A person's side of membership: their workspaces, invitations to accept or decline, leaving.

An invitation is the inviter's offer; nothing happens until the invitee, signed in with the
invited e-mail, accepts it (``core/identity/team.py`` is the inviter's side). Someone may belong to several
workspaces and names the one a request acts in with the ``X-Workspace-Id`` header
(``core/identity/auth.py``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from core.errors import NotFound
from core.identity import accounts
from core.identity.team import keep_an_owner
from store.records import Invitation, Membership, User, Workspace

if TYPE_CHECKING:
    from core.services import Services


@attrs.frozen
class Joined:
    """A workspace the caller acts in, and the caller's role there (none for an API key)."""

    org: Workspace
    role: str | None
    joined_at: dt.datetime | None
    "When the membership began; none for an API key."
    default: bool
    "The workspace a request without ``X-Workspace-Id`` acts in."


@attrs.frozen
class Offer:
    """An invitation as its invitee sees it."""

    id: uuid.UUID
    org: Workspace
    role: str
    invited_by: str | None
    "The inviter's e-mail, so the invitee knows who asks."
    created_at: dt.datetime


def workspaces_of(services: Services, user: User) -> list[Joined]:
    return listed(accounts.joined(services, user))


def listed(memberships: Sequence[tuple[Membership, Workspace]]) -> list[Joined]:
    """Memberships as the person sees them: also a session's, read when it was identified."""
    return [
        Joined(org=workspace, role=m.role, joined_at=m.created_at, default=i == 0)
        for i, (m, workspace) in enumerate(memberships)
    ]


def only_owner_of(services: Services, joined: Sequence[Joined]) -> set[uuid.UUID]:
    """A unit of work: the workspaces among ``joined`` whose only owner the person is, which
    ``leave`` refuses to let them leave (so the portal does not offer it)."""
    return {j.org.id for j in joined if j.role == "owner" and services.store.team.owner_count(j.org.id) <= 1}


def offers_for(services: Services, user: User) -> list[Offer]:
    return [_offer(services, invitation) for invitation in services.store.team.invitations_for_email(user.email)]


def accept(services: Services, user: User, invitation_id: uuid.UUID) -> Joined:
    """Join the inviting workspace with the invited role (the invitation is used up)."""
    store = services.store
    with store.transaction():
        invitation = _own_invitation(services, user, invitation_id)
        joined = {m.workspace_id: m for m in store.accounts.memberships_of_user(user.id)}
        membership = joined.get(invitation.workspace_id)
        if membership is None:  # else already a member (added meanwhile): the role stays
            membership = Membership(
                workspace_id=invitation.workspace_id, user_id=user.id, role=invitation.role,
                created_at=services.clock.now(),
            )
            store.accounts.insert_membership(membership)
        store.team.delete_invitation(invitation.id)
    first = store.accounts.memberships_of_user(user.id)[0]
    return Joined(org=_workspace(services, membership.workspace_id), role=membership.role,
                  joined_at=membership.created_at, default=first.workspace_id == membership.workspace_id)


def decline(services: Services, user: User, invitation_id: uuid.UUID) -> None:
    with services.store.transaction():
        services.store.team.delete_invitation(_own_invitation(services, user, invitation_id).id)


def leave(services: Services, user: User, workspace_id: uuid.UUID) -> None:
    """Stop being a member; a workspace's last owner cannot leave it (make another owner first)."""
    store = services.store
    with store.transaction():
        member = store.team.member(workspace_id, user.id)
        if member is None:
            raise NotFound("Workspace not found.")
        keep_an_owner(services, workspace_id, member)
        store.team.remove_member(workspace_id, user.id)


def _own_invitation(services: Services, user: User, invitation_id: uuid.UUID) -> Invitation:
    """One of the caller's invitations; anyone else's is 404, as if it did not exist."""
    for invitation in services.store.team.invitations_for_email(user.email):
        if invitation.id == invitation_id:
            return invitation
    raise NotFound("Invitation not found.")


def _offer(services: Services, invitation: Invitation) -> Offer:
    inviter = services.store.accounts.get_user(invitation.invited_by) if invitation.invited_by else None
    return Offer(
        id=invitation.id, org=_workspace(services, invitation.workspace_id), role=invitation.role,
        invited_by=inviter.email if inviter else None, created_at=invitation.created_at,
    )


def _workspace(services: Services, workspace_id: uuid.UUID) -> Workspace:
    workspace = services.store.accounts.get_workspace(workspace_id)
    assert workspace is not None  # memberships and invitations go with their workspace
    return workspace
