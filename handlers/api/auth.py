"""Sign-up and sessions: ``/v1/public/signup`` and ``/v1/auth/*``."""

from __future__ import annotations

from core.identity import accounts, signin, signup
from core.identity.scopes import ROLES
from handlers.base import ApiHandler, require


class SessionHandler(ApiHandler):
    @require(scopes=("domains:read",), roles=ROLES, optional=True)
    async def get(self) -> None:
        """JSON ``null`` without a bearer; a bearer that is sent must be valid."""
        if self.principal is None:
            self.send_json(None)
            return
        self.send_json(await self.services.store.run(accounts.session_of, self.services, self.principal))


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
