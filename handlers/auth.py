"""Sign-up and sessions: ``/v1/public/signup`` and ``/v1/auth/*``."""

from __future__ import annotations

import attrs

from core import signin, signup
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


class SignupHandler(ApiHandler):
    async def post(self) -> None:
        result = await signup.signup(self.services, self.body(signup.SignupRequest))
        self.send_json(result, status=201 if isinstance(result, signup.SignedUp) else 202)


class ExchangeHandler(ApiHandler):
    async def post(self) -> None:
        self.send_json(await signin.exchange(self.services, self.body(signin.ExchangeRequest)))


class LogoutHandler(ApiHandler):
    async def post(self) -> None:
        """A compatibility acknowledgement: ID tokens and API keys stay valid (spec)."""
        self.send_empty()


routes = [
    (r"/v1/public/signup", SignupHandler),
    (r"/v1/auth/oidc/exchange", ExchangeHandler),
    (r"/v1/auth/session", SessionHandler),
    (r"/v1/auth/logout", LogoutHandler),
]
