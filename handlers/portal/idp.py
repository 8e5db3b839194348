"""``/idp/*``: the built-in development identity provider (routed only while it is active)."""

from __future__ import annotations

from core.identity.dev_idp import AuthorizeError, DevIdentityProvider, InvalidEmail, TokenError
from handlers.portal.pages import PageHandler


class _IdpHandler(PageHandler):
    #: Counted in the shared ``api`` rate-limit bucket. Not in ``auth``: a portal sign-in already
    #: counts there once (the callback), and the token call comes from the service itself. The
    #: discovery document and the JWKS are static and fetched by the service itself: not counted.
    rate_limited = True

    async def prepare(self) -> None:
        if self.rate_limited:
            await self.hit_rate_limit("/v1/idp")
        await super().prepare()

    def check_xsrf_cookie(self) -> None:
        """The development provider stands in for an external identity provider: its token
        endpoint is called server to server, and its form signs in only the e-mail typed into it."""

    @property
    def idp(self) -> DevIdentityProvider:
        assert self.services.dev_idp is not None
        return self.services.dev_idp

    def params(self) -> dict[str, str]:
        return {k: self.get_argument(k) for k in self.request.arguments}


class DiscoveryHandler(_IdpHandler):
    rate_limited = False

    async def get(self) -> None:
        self.finish(self.idp.discovery())


class JwksHandler(_IdpHandler):
    rate_limited = False

    async def get(self) -> None:
        self.finish(self.idp.jwks())


class AuthorizeHandler(_IdpHandler):
    async def get(self) -> None:
        try:
            params = self.idp.check_authorize(self.params())
        except AuthorizeError as exc:
            self.set_status(400)
            self.render_page("idp_authorize.html", params={}, error=str(exc))
            return
        self.render_page("idp_authorize.html", params=params, error=None, login_hint=self.get_argument("login_hint", ""))

    async def post(self) -> None:
        params = self.params()
        params.pop("email", None)
        email = self.typed("email")  # as typed: the e-mail rule (core/text.py) sees what it would refuse
        try:
            location = await self.idp.issue_code(params, email)
        except AuthorizeError as exc:
            self.set_status(400)
            self.render_page("idp_authorize.html", params={}, error=str(exc))
            return
        except InvalidEmail as exc:
            self.set_status(400)
            self.render_page("idp_authorize.html", params=params, error=str(exc), login_hint=email)
            return
        self.redirect(location)


class TokenHandler(_IdpHandler):
    async def post(self) -> None:
        form = {k: self.get_body_argument(k) for k in self.request.body_arguments}
        self.set_header("Cache-Control", "no-store")
        try:
            self.finish(await self.idp.token(form, self.request.headers.get("Authorization")))
        except TokenError as exc:
            self.set_status(exc.status)
            self.finish({"error": exc.error, "error_description": exc.description})


routes = [
    (r"/idp/\.well-known/openid-configuration", DiscoveryHandler),
    (r"/idp/jwks", JwksHandler),
    (r"/idp/authorize", AuthorizeHandler),
    (r"/idp/token", TokenHandler),
]
