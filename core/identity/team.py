"""Team management (owner/admin sessions): members, roles and invitations.

Rules: only an owner grants, changes or removes the owner role; a workspace always keeps at
least one owner; an invitation becomes a membership only when its invitee accepts it
(core/identity/workspaces.py).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import attrs

from core.errors import Conflict, Forbidden, NotFound, ValidationError
from core.identity.scopes import ROLES
from core.text import EMAIL_MESSAGE, email_address, normalise_email, shown
from store.records import Invitation, Member

if TYPE_CHECKING:
    from core.identity.auth import Principal
    from core.services import Services


@attrs.frozen
class Invite:
    email: str
    role: str


@attrs.frozen
class RoleChange:
    role: str


@attrs.frozen
class Team:
    members: list[Member]
    invitations: list[Invitation]


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValidationError.field("role", f"Must be one of: {', '.join(ROLES)} (got '{shown(role)}')")


def _owner_only(principal: Principal, touches_owner: bool) -> None:
    if touches_owner and principal.role != "owner":
        raise Forbidden("Only an owner can grant, change or remove the owner role.")


def team(services: Services, *, principal: Principal) -> Team:
    store = services.store.team
    return Team(members=store.members(principal.workspace_id), invitations=store.invitations(principal.workspace_id))


def invite(services: Services, *, principal: Principal, request: Invite) -> Invitation:
    _check_role(request.role)
    address = email_address(request.email)
    if address is None:
        raise ValidationError.field("email", EMAIL_MESSAGE)
    email = normalise_email(address)
    _owner_only(principal, request.role == "owner")
    store = services.store
    with store.transaction():
        if store.team.member_by_email(principal.workspace_id, email) is not None:
            raise Conflict("already_member", f"{shown(email)} is already a member of this workspace.")
        if store.team.invitation_by_email(principal.workspace_id, email) is not None:
            raise Conflict("already_invited", f"{shown(email)} has a pending invitation; revoke it to invite again.")
        invitation = Invitation(
            id=uuid.uuid4(),
            workspace_id=principal.workspace_id,
            email=email,
            role=request.role,
            created_at=services.clock.now(),
            invited_by=principal.user.id if principal.user else None,
        )
        store.team.insert_invitation(invitation)
    return invitation


def revoke_invitation(services: Services, *, principal: Principal, invitation_id: uuid.UUID) -> None:
    store = services.store
    with store.transaction():
        invitation = store.team.invitation(principal.workspace_id, invitation_id)
        if invitation is None:
            raise NotFound("Invitation not found.")
        _owner_only(principal, invitation.role == "owner")
        store.team.delete_invitation(invitation.id)


def _load_member(services: Services, principal: Principal, user_id: uuid.UUID) -> Member:
    member = services.store.team.member(principal.workspace_id, user_id)
    if member is None:
        raise NotFound("Member not found.")
    return member


def keep_an_owner(services: Services, workspace_id: uuid.UUID, member: Member) -> None:
    """A workspace always keeps an owner: its last one can be neither demoted nor removed, nor leave."""
    if member.role == "owner" and services.store.team.owner_count(workspace_id) <= 1:
        raise Conflict("last_owner", "The workspace's last owner cannot be removed, demoted or leave; make another owner first.")


def change_role(services: Services, *, principal: Principal, user_id: uuid.UUID, request: RoleChange) -> Member:
    _check_role(request.role)
    store = services.store
    with store.transaction():
        member = _load_member(services, principal, user_id)
        _owner_only(principal, "owner" in (member.role, request.role))
        if member.role == request.role:
            return member
        if request.role != "owner":
            keep_an_owner(services, principal.workspace_id, member)
        store.team.set_role(principal.workspace_id, user_id, request.role)
    return attrs.evolve(member, role=request.role)


def remove_member(services: Services, *, principal: Principal, user_id: uuid.UUID) -> None:
    store = services.store
    with store.transaction():
        member = _load_member(services, principal, user_id)
        _owner_only(principal, member.role == "owner")
        keep_an_owner(services, principal.workspace_id, member)
        store.team.remove_member(principal.workspace_id, user_id)
