"""``/v1/auth/*``: the current session and the logout acknowledgement."""

from __future__ import annotations

import attrs

from core.scopes import ROLES
from handlers.base import ApiHandler, require
from store.records import Workspace


@attrs.frozen
class Session:
    user_email: str
    org: Workspace


class SessionHandler(ApiHandler):
    @require(scopes=("domains:read",), roles=ROLES, optional=True)
    async def get(self) -> None:
        """JSON ``null`` without a bearer; a bearer that is sent must be valid."""
        if self.principal is None:
            self.send_json(None)
            return
        if self.principal.user is not None:
            email = self.principal.user.email
        else:
            # An API key acts for its workspace, not a person: it reports the workspace owner.
            email = self.services.store.accounts.owner_email(self.principal.workspace_id) or ""
        self.send_json(Session(user_email=email, org=self.principal.workspace))


class LogoutHandler(ApiHandler):
    async def post(self) -> None:
        """A compatibility acknowledgement: ID tokens and API keys stay valid (spec)."""
        self.send_empty()


routes = [
    (r"/v1/auth/session", SessionHandler),
    (r"/v1/auth/logout", LogoutHandler),
]
