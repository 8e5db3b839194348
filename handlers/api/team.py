"""``/v1/team``: members, roles and invitations (owner/admin sessions only; designed here)."""

from __future__ import annotations

from core.identity import team
from core.identity.scopes import MANAGERS
from handlers.base import ApiHandler, parse_id, require


class TeamHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def get(self) -> None:
        self.send_json(await self.services.store.run(team.team, self.services, principal=self.authorized))


class InvitationListHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def post(self) -> None:
        request = self.body(team.Invite)
        invitation = await self.services.store.run(team.invite, self.services, principal=self.authorized, request=request)
        self.send_json(invitation, status=201)


class InvitationHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def delete(self, invitation_id: str) -> None:
        await self.services.store.run(
            team.revoke_invitation, self.services, principal=self.authorized,
            invitation_id=parse_id(invitation_id, "Invitation"),
        )
        self.send_empty()


class MemberHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def patch(self, user_id: str) -> None:
        request = self.body(team.RoleChange)
        member = await self.services.store.run(
            team.change_role, self.services, principal=self.authorized, user_id=parse_id(user_id, "Member"),
            request=request,
        )
        self.send_json(member)

    @require(scopes=None, roles=MANAGERS)
    async def delete(self, user_id: str) -> None:
        await self.services.store.run(
            team.remove_member, self.services, principal=self.authorized, user_id=parse_id(user_id, "Member")
        )
        self.send_empty()


routes = [
    (r"/v1/team", TeamHandler),
    (r"/v1/team/invitations", InvitationListHandler),
    (r"/v1/team/invitations/([^/]+)", InvitationHandler),
    (r"/v1/team/members/([^/]+)", MemberHandler),
]
