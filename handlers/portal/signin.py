"""Signing up, in and out: the home page with the sign-up form, its answer, the OpenID Connect
sign-in (code flow with PKCE) and sign-out."""

from __future__ import annotations

import hmac
import json
from typing import Any
from urllib.parse import urlencode, urlsplit

from tornado.web import HTTPError

from core.errors import ApiError
from core.identity import accounts, portal_signin, signin, signup
from handlers.portal import forms
from handlers.portal.pages import (
    FLASH_COOKIE,
    REFUSED_COOKIE,
    SESSION_COOKIE,
    SIGNED_UP_COOKIE,
    SIGNIN_COOKIE,
    SIGNIN_FAILED_COOKIE,
    PageHandler,
    refusal_text,
)

#: Where a failed sign-in is shown: a clean address, not the callback's with its spent ``?code=``.
SIGNIN_FAILED = "/signin/failed"
#: How long that page can show why (a reload, a moment later); then it says the sign-in is stale.
SIGNIN_FAILED_SECONDS = 600
STALE = "This sign-in link is stale, was already used, or was not started here. Start again."
#: What a sign-in may ask the identity provider to do first: let the person choose (or sign in
#: as) another account, when the one it signed in with had no workspace here.
PROMPTS = ("select_account",)


class HomeHandler(PageHandler):
    async def get(self) -> None:
        self.render_page("home.html", base_url=self.services.config.server.base_url, error=None, email="", domain="")


class SignupPageHandler(PageHandler):
    """The passwordless sign-up form, through the same core function as POST /v1/public/signup."""

    async def get(self) -> None:
        """``/signup``: the form, as on the home page; after a refusal, with its reason and what was typed."""
        error, typed = self.refused()
        self.render_page("home.html", base_url=self.services.config.server.base_url, error=error,
                         email=typed.get("email", ""), domain=typed.get("domain", ""))

    async def post(self) -> None:
        await self.hit_rate_limit("/v1/public/signup")
        email, domain = self.typed("email"), self.typed("domain")
        try:
            result = await signup.signup(self.services, signup.SignupRequest(email=email, domain=domain))
        except ApiError as exc:
            self.refuse("/signup", refusal_text(exc), {"email": email, "domain": domain})
            return
        created = result if isinstance(result, signup.SignedUp) else None
        # An e-mail that has an account already: nothing was signed up, and the hostname typed is
        # filled in on the domains page after signing in.
        next_path = urlsplit(created.portal_url).path if created else "/domains?" + urlencode({"add": domain.strip()})
        # Post/redirect/get: the answer page reads what happened from a signed cookie, so a reload
        # of it signs nobody up again. It is kept until the person signs in (or for an hour).
        shown = {"email": result.user_email, "apex": created.domain.apex if created else None,
                 "typed": domain.strip(), "login": "/login?" + urlencode({"next": next_path, "login_hint": result.user_email})}
        self.set_signed_cookie(SIGNED_UP_COOKIE, json.dumps(shown), expires_days=1 / 24, httponly=True,
                               samesite="Lax", secure=self.secure_cookies)
        self.redirect("/signup/done", status=303)


class SignedUpPage(PageHandler):
    async def get(self) -> None:
        sealed = self.get_signed_cookie(SIGNED_UP_COOKIE, max_age_days=1)
        self.render_page("signed_up.html", shown=json.loads(sealed) if sealed else None)


class LoginHandler(PageHandler):
    """Start an OpenID Connect sign-in: code flow with PKCE; state, nonce and verifier kept
    server-side under the state (single use), the state also in a signed cookie of this browser."""

    async def get(self) -> None:
        try:
            endpoint = (await self.services.oidc.discovery())["authorization_endpoint"]
        except (ApiError, KeyError):
            raise HTTPError(502) from None
        await self.hit_rate_limit("/v1/portal/login")  # the shared api bucket
        pending = portal_signin.start_signin(portal_signin.safe_next(self.get_argument("next", None)))
        self.set_signed_cookie(
            SIGNIN_COOKIE, portal_signin.seal(self.services.keyring, pending), expires_days=portal_signin.SIGNIN_SECONDS / 86400,
            httponly=True, samesite="Lax", secure=self.secure_cookies,
        )
        client = self.services.oidc_client
        extra = {"login_hint": self.get_argument("login_hint")} if self.get_argument("login_hint", "") else {}
        if self.get_argument("prompt", "") in PROMPTS:
            extra["prompt"] = self.get_argument("prompt")
        # Authlib here, not above: not at every start-up (core/identity/oidc.py)
        from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
        from authlib.oauth2.rfc7636 import create_s256_code_challenge

        self.redirect(
            prepare_grant_uri(
                endpoint, client.client_id, "code", redirect_uri=client.redirect_uri, scope="openid email",
                state=pending.state, nonce=pending.nonce,
                code_challenge=create_s256_code_challenge(pending.verifier), code_challenge_method="S256", **extra,
            )
        )


class CallbackHandler(PageHandler):
    """Finish the sign-in: the state must be this browser's and unused; redeem the code through
    the same core function as POST /v1/auth/oidc/exchange; keep the session; clean URL."""

    async def head(self) -> None:
        """Not GET without a body here: GET redeems the one-time state and the code, and HEAD
        must change nothing (a link checker or prefetch would spend the sign-in)."""
        raise HTTPError(405)

    async def get(self) -> None:
        await self.hit_rate_limit("/v1/auth/oidc/exchange")
        cookie = self.get_signed_cookie(SIGNIN_COOKIE, max_age_days=1)
        self.clear_cookie(SIGNIN_COOKIE)
        state = self.get_argument("state", "")
        pending = portal_signin.unseal(self.services.keyring, cookie.decode()) if cookie else None
        # The state ties the answer to a sign-in this browser started (CSRF), compared in constant
        # time, and is used up here.
        if (
            pending is None
            or not hmac.compare_digest(state.encode(), pending.state.encode())
            or not await self.services.used_signin_states.use(pending.state)
        ):
            self.failed(400, STALE)
            return
        if self.get_argument("error", None) or not self.get_argument("code", None):
            # The provider's error code, cut short: it rides in a cookie to the page that shows it.
            self.failed(400, f"The identity provider did not sign you in ({self.get_argument('error', 'no code')[:100]}).")
            return
        request = signin.ExchangeRequest(code=self.get_argument("code"), code_verifier=pending.verifier, nonce=pending.nonce)
        try:
            result = await signin.exchange(self.services, request)
        except ApiError as exc:
            # Signed in as someone with no workspace here: starting again would sign in the same
            # account, so the page offers another account and sign-up instead.
            self.failed(exc.status, exc.message, no_account=exc.message == accounts.NO_ACCOUNT)
            return
        self.set_signed_cookie(
            SESSION_COOKIE, result.token, expires_days=result.expires_in_seconds / 86400, httponly=True, samesite="Lax",
            secure=self.secure_cookies,
        )
        self.clear_cookie(SIGNED_UP_COOKIE)  # its page has done its job
        self.clear_cookie(SIGNIN_FAILED_COOKIE)
        self.redirect(pending.next_path)  # a clean URL: a reload does not replay the code

    def failed(self, status: int, error: str, *, no_account: bool = False) -> None:
        """Why, on a page of its own: the address bar keeps no spent code (to copy, bookmark or
        reload), as it keeps none after a sign-in that worked."""
        said = {"status": status, "error": error, "no_account": no_account}
        self.set_signed_cookie(SIGNIN_FAILED_COOKIE, json.dumps(said), expires_days=SIGNIN_FAILED_SECONDS / 86400,
                               httponly=True, samesite="Lax", secure=self.secure_cookies)
        self.redirect(SIGNIN_FAILED, status=303)


class SigninFailedPage(PageHandler):
    """``/signin/failed``: why the sign-in just tried failed, with its status (400, 403...); without
    that (another browser, later) the sign-in it was is stale, which is what the page says."""

    async def get(self) -> None:
        sealed = self.get_signed_cookie(SIGNIN_FAILED_COOKIE, max_age_days=SIGNIN_FAILED_SECONDS / 86400)
        said: dict[str, Any] = json.loads(sealed) if sealed else {"status": 400, "error": STALE, "no_account": False}
        self.set_status(said["status"])
        self.render_page("signin.html", error=said["error"], no_account=said["no_account"])


class LogoutHandler(PageHandler):
    async def post(self) -> None:
        # Everything this browser holds about the person goes, for whoever uses it next.
        for cookie in (SESSION_COOKIE, FLASH_COOKIE, SIGNED_UP_COOKIE, REFUSED_COOKIE, SIGNIN_FAILED_COOKIE,
                       forms.REVEAL_COOKIE):
            self.clear_cookie(cookie)
        self.redirect("/", status=303)


routes = [
    (r"/", HomeHandler),
    (r"/signup", SignupPageHandler),
    (r"/signup/done", SignedUpPage),
    (r"/login", LoginHandler),
    (r"/auth/callback", CallbackHandler),
    (r"/signin/failed", SigninFailedPage),
    (r"/logout", LogoutHandler),
]
