"""A person's own workspaces and invitations (``/v1/workspaces``, ``/v1/invitations``; designed here).

These need a session but no workspace: someone invited and not yet a member signs in to see and
accept their invitations.
"""

from __future__ import annotations

from core.identity import workspaces
from handlers.base import ApiHandler, parse_id


class WorkspaceListHandler(ApiHandler):
    async def get(self) -> None:
        self.person()
        assert self.caller is not None
        # Read with the person when the request was authenticated: no second unit of work.
        self.send_json({"workspaces": workspaces.listed(self.caller.memberships)})


class LeaveHandler(ApiHandler):
    async def post(self, workspace_id: str) -> None:
        await self.services.store.run(workspaces.leave, self.services, self.person(), parse_id(workspace_id, "Workspace"))
        self.send_empty()


class InvitationListHandler(ApiHandler):
    async def get(self) -> None:
        self.send_json({"invitations": await self.services.store.run(workspaces.offers_for, self.services, self.person())})


class AcceptHandler(ApiHandler):
    async def post(self, invitation_id: str) -> None:
        joined = await self.services.store.run(
            workspaces.accept, self.services, self.person(), parse_id(invitation_id, "Invitation")
        )
        self.send_json(joined)


class DeclineHandler(ApiHandler):
    async def post(self, invitation_id: str) -> None:
        await self.services.store.run(
            workspaces.decline, self.services, self.person(), parse_id(invitation_id, "Invitation")
        )
        self.send_empty()


routes = [
    (r"/v1/workspaces", WorkspaceListHandler),
    (r"/v1/workspaces/([^/]+)/leave", LeaveHandler),
    (r"/v1/invitations", InvitationListHandler),
    (r"/v1/invitations/([^/]+)/accept", AcceptHandler),
    (r"/v1/invitations/([^/]+)/decline", DeclineHandler),
]
