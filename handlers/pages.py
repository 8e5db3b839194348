"""Server-rendered portal pages (Jinja2, autoescaped)."""

from __future__ import annotations

import hmac
import json
import secrets
from pathlib import Path
from typing import Any

import jinja2
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from tornado import httputil
from tornado.web import HTTPError

from core import signin
from core.errors import ApiError
from handlers.base import BaseHandler

SIGNIN_COOKIE = "cps_signin"
SIGNIN_MINUTES = 10

TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent.parent / "templates"),
    autoescape=True,
)


class PageHandler(BaseHandler):
    def render_page(self, name: str, **context: Any) -> None:
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.finish(TEMPLATES.get_template(name).render(**context))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # Never a traceback on a page either; the request id ties a 500 to the log.
        self.render_page(
            "error.html",
            status=status_code,
            reason=httputil.responses.get(status_code, "Error"),
            request_id=self.request_id,
        )


class HomeHandler(PageHandler):
    async def get(self) -> None:
        self.render_page("home.html", base_url=self.services.config.server.base_url)


class LoginHandler(PageHandler):
    """Start an OpenID Connect sign-in: PKCE verifier, state and nonce kept in a signed cookie."""

    async def get(self) -> None:
        try:
            endpoint = (await self.services.oidc.discovery())["authorization_endpoint"]
        except (ApiError, KeyError):
            raise HTTPError(502) from None
        flow = {"state": secrets.token_urlsafe(24), "verifier": secrets.token_urlsafe(48), "nonce": secrets.token_urlsafe(24)}
        self.set_signed_cookie(
            SIGNIN_COOKIE, json.dumps(flow), expires_days=SIGNIN_MINUTES / 1440, httponly=True, samesite="Lax",
            secure=self.request.protocol == "https",
        )
        client = self.services.oidc_client
        self.redirect(
            prepare_grant_uri(
                endpoint, client.client_id, "code", redirect_uri=client.redirect_uri, scope="openid email",
                state=flow["state"], nonce=flow["nonce"],
                code_challenge=create_s256_code_challenge(flow["verifier"]), code_challenge_method="S256",
            )
        )


class CallbackHandler(PageHandler):
    """Finish the sign-in: check the state, exchange the code, show the session token."""

    async def get(self) -> None:
        raw = self.get_signed_cookie(SIGNIN_COOKIE, max_age_days=SIGNIN_MINUTES / 1440)
        self.clear_cookie(SIGNIN_COOKIE)
        self.set_header("Cache-Control", "no-store")
        flow = json.loads(raw) if raw else None
        state = self.get_argument("state", "")
        # Constant-time: the state is the CSRF defence of the redirect back to us.
        if flow is None or not hmac.compare_digest(state.encode(), flow["state"].encode()):
            self.set_status(400)
            self.render_page("signin.html", error="This sign-in link is stale or was not started here. Start again.")
            return
        if self.get_argument("error", None) or not self.get_argument("code", None):
            self.set_status(400)
            self.render_page("signin.html", error=f"The identity provider did not sign you in ({self.get_argument('error', 'no code')}).")
            return
        request = signin.ExchangeRequest(code=self.get_argument("code"), code_verifier=flow["verifier"], nonce=flow["nonce"])
        try:
            result = await signin.exchange(self.services, request)
        except ApiError as exc:
            self.set_status(exc.status)
            self.render_page("signin.html", error=exc.message)
            return
        self.render_page("signin.html", error=None, result=result, base_url=self.services.config.server.base_url)


class PageNotFoundHandler(PageHandler):
    async def prepare(self) -> None:
        raise HTTPError(404)


routes = [
    (r"/", HomeHandler),
    (r"/login", LoginHandler),
    (r"/auth/callback", CallbackHandler),
]
