"""Server-rendered portal pages (Jinja2, autoescaped): the base page handler, the home page with
the sign-up form, sign-in and sign-out (the account page: handlers/portal/account.py).

A signed-in person's session is their OpenID Connect ID token, kept in a signed, HttpOnly,
SameSite=Lax cookie (``Secure`` when ``portal_url`` is https) and verified on every page exactly
as an API bearer is. Every form carries Tornado's XSRF token and, on a signed-in page, a one-time
token that makes it act once (handlers/portal/forms.py). Pages load nothing from outside the service and
work without JavaScript; ``static/portal.js`` only adds copy buttons and disables a form's buttons
while it is sending.
"""

from __future__ import annotations

import hmac
import json
import uuid
from collections.abc import Awaitable, Callable
from http.client import responses
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import jinja2
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from markupsafe import Markup
from tornado.web import HTTPError

from core import logs
from core.errors import ApiError, NotFound
from core.identity import portal_signin, signin, signup, workspaces
from core.identity.auth import Caller, Principal, act_in, identify
from handlers.base import BaseHandler
from handlers.portal import forms
from store.records import User

SESSION_COOKIE = "cps_session"
WORKSPACE_COOKIE = "cps_workspace"
SIGNIN_COOKIE = "cps_signin"
FLASH_COOKIE = "cps_flash"
SIGNED_UP_COOKIE = "cps_signed_up"

TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).resolve().parents[2] / "templates"),
    autoescape=True,
)
#: Status values as a customer reads them; the API's raw values stay in the API.
STATUS_WORDS = {"action_needed": "needs action", "none": "no certificate yet", "error": "has a problem",
                "read_only": "read-only"}
TEMPLATES.filters["words"] = lambda status: STATUS_WORDS.get(status, status)
#: A long hostname wraps between its labels, never inside one (``<wbr>`` copies as nothing);
#: templates keep the plain value in a ``data-value`` attribute too, for scripts that read the page.
TEMPLATES.filters["breakable"] = lambda name: Markup("<wbr>.").join(str(name).split("."))

#: Nothing from elsewhere, no framing (clickjacking), no inline script.
_CSP = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"


class _RateLimited(HTTPError):
    """A page's 429, with the seconds until its bucket refills (its ``Retry-After``)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(429)
        self.retry_after = retry_after


def refusal_text(exc: ApiError) -> str:
    """What a form shows for a refused request: each field's problem, or the error's message."""
    problems = [problem for problems in getattr(exc, "field_errors", {}).values() for problem in problems]
    return "; ".join(problems) or exc.message


class PageHandler(BaseHandler):
    principal: Principal | None
    user: User | None = None
    "The signed-in person, also when they belong to no workspace yet (invited only)."
    caller: Caller | None = None

    def set_default_headers(self) -> None:
        super().set_default_headers()
        self.set_header("Content-Security-Policy", _CSP)
        self.set_header("X-Frame-Options", "DENY")
        # Pages can carry credentials (the session token, verification-link tokens in the path):
        # never in a Referer sent elsewhere, never in a shared cache.
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("Cache-Control", "no-store")

    @property
    def secure_cookies(self) -> bool:
        return self.services.config.server.secure_cookies

    async def prepare(self) -> None:
        token = self.get_signed_cookie(SESSION_COOKIE, max_age_days=1)
        if token is None:
            return
        try:
            self.caller = await identify(self.services, token.decode())
        except ApiError:  # expired, or no longer anyone's: signed out
            self.clear_cookie(SESSION_COOKIE)
            return
        self.user = self.caller.user
        self.principal = self.act_in(self.chosen_workspace_id())
        if self.principal is not None:
            logs.workspace.set(str(self.principal.workspace_id))

    def act_in(self, workspace_id: uuid.UUID | None) -> Principal | None:
        """The person in the workspace the portal shows (the one chosen, else the default), if any."""
        assert self.caller is not None
        for choice in (workspace_id, None):
            try:
                return act_in(self.services, self.caller, choice)
            except NotFound:  # left it, or removed from it since: the default instead
                continue
            except ApiError:  # in no workspace yet: the account page shows their invitations
                return None
        return None

    def chosen_workspace_id(self) -> uuid.UUID | None:
        chosen = self.get_signed_cookie(WORKSPACE_COOKIE, max_age_days=365)
        try:
            return uuid.UUID(chosen.decode()) if chosen else None
        except ValueError:
            return None

    def choose_workspace(self, workspace_id: uuid.UUID) -> None:
        """Show this workspace from now on (the API's X-Workspace-Id, remembered by the browser)."""
        self.set_signed_cookie(WORKSPACE_COOKIE, str(workspace_id), expires_days=365, httponly=True,
                               samesite="Lax", secure=self.secure_cookies)

    def get_current_user(self) -> Principal | None:
        return self.principal

    def get_login_url(self) -> str:
        # Signed in but in no workspace yet: the account page, with their invitations, not a sign-in loop.
        return "/account" if self.user is not None else super().get_login_url()

    async def hit_rate_limit(self, api_path: str) -> None:
        """Count a page request in the bucket of the API call it stands for (sign-in, sign-up)."""
        decision = await self.services.limiter.admit(api_path, self.client_ip)
        if decision is not None and decision.exceeded is not None:
            raise _RateLimited(decision.exceeded.reset)

    def flash(self, message: str) -> None:
        """A message for the next page shown (after a redirect)."""
        self.set_signed_cookie(FLASH_COOKIE, message, expires_days=None, httponly=True, samesite="Lax",
                               secure=self.secure_cookies)

    async def act(self, action: Callable[[], Awaitable[forms.Outcome]], *, in_workspace: bool = True) -> None:
        """Run a form's action once per submitted form (handlers/portal/forms.py) and redirect to what it
        says (303: the page is then fetched with GET, so a reload repeats nothing)."""
        outcome = await forms.run_once(self, action, in_workspace=in_workspace)
        if outcome.message:
            self.flash(outcome.message)
        if outcome.secret is not None:
            assert self.user is not None
            sealed = self.services.keyring.encrypt("portal-reveal-cookie", outcome.secret, bound_to=str(self.user.id))
            self.set_signed_cookie(forms.REVEAL_COOKIE, sealed, expires_days=forms.REVEAL_SECONDS / 86400,
                                   httponly=True, samesite="Lax", secure=self.secure_cookies)
        self.redirect(outcome.location, status=303)

    def revealed_secret(self) -> str | None:
        """The secret an action just made, shown on this page once (the cookie is cleared)."""
        sealed = self.get_signed_cookie(forms.REVEAL_COOKIE, max_age_days=forms.REVEAL_SECONDS / 86400)
        if sealed is None or self.user is None:
            return None
        self.clear_cookie(forms.REVEAL_COOKIE)
        try:
            return self.services.keyring.decrypt("portal-reveal-cookie", sealed.decode(), bound_to=str(self.user.id))
        except ValueError:
            return None

    def allow_form_redirect_to(self, url: str) -> None:
        """A form on this page answers with a redirect to ``url``'s origin (one-click set-up at the
        customer's DNS host): browsers hold a form's redirects to ``form-action`` too."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        self.set_header("Content-Security-Policy", _CSP.replace("form-action 'self'", f"form-action 'self' {origin}"))

    def render_page(self, name: str, **context: Any) -> None:
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        flash = self.get_signed_cookie(FLASH_COOKIE, max_age_days=1)
        if flash is not None:
            self.clear_cookie(FLASH_COOKIE)
        context.setdefault("principal", self.principal)
        context.setdefault("user", self.user)
        context.setdefault("flash", flash.decode() if flash else None)
        if self.caller is not None and self.user is not None and "switcher" not in context:
            # The header's workspace switcher, from the workspaces read with the person (prepare).
            context["switcher"] = workspaces.listed(self.caller.memberships)
        context.setdefault("here", self.request.path)
        context["xsrf"] = Markup(self.xsrf_form_html())
        if self.user is not None:  # every form of a signed-in page: one action per intent
            shown = str(self.principal.workspace_id) if self.principal is not None else ""
            token = forms.new_token(self.services, str(self.user.id), shown)
            context["xsrf"] += Markup('<input type="hidden" name="{}" value="{}">').format(forms.FIELD, token)
        self.finish(TEMPLATES.get_template(name).render(**context))

    def decode_argument(self, value: bytes, name: str | None = None) -> str:
        # A path id that is not UTF-8 names nothing: the page's own lookup makes it a 404 page, like
        # any malformed id, instead of Tornado's 400. Query arguments are still decoded strictly.
        try:
            return super().decode_argument(value, name)
        except HTTPError:
            if name is not None:
                raise
            return value.decode("utf-8", "replace")

    def check_xsrf_cookie(self) -> None:
        """Checked for the methods the page has; another one does nothing, so its answer is the 405
        that says which methods there are, not a 403 about a token."""
        if self.request.method in self.allowed_methods():
            super().check_xsrf_cookie()

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # Never a traceback on a page either; the request id ties a 500 to the log.
        error = kwargs.get("exc_info", (None, None, None))[1]
        retry_after = None
        if isinstance(error, _RateLimited):  # set here: sending an error clears earlier headers
            retry_after = error.retry_after
            self.set_header("Retry-After", str(retry_after))
        if status_code == 405:  # RFC 9110: a 405 says which methods the page has
            self.set_header("Allow", ", ".join(self.allowed_methods()))
        self.render_page(
            "error.html",
            status=status_code,
            reason=responses.get(status_code, "Error"),
            request_id=self.request_id,
            stale_form=error.why if isinstance(error, forms.StaleForm) else None,
            retry_after=retry_after,
        )


class HomeHandler(PageHandler):
    async def get(self) -> None:
        self.render_page("home.html", base_url=self.services.config.server.base_url, error=None, email="", domain="")


class SignupPageHandler(PageHandler):
    """The passwordless sign-up form, through the same core function as POST /v1/public/signup."""

    async def get(self) -> None:
        """``/signup`` typed in the address bar: the form, as on the home page."""
        self.render_page("home.html", base_url=self.services.config.server.base_url, error=None, email="", domain="")

    async def post(self) -> None:
        await self.hit_rate_limit("/v1/public/signup")
        email, domain = self.get_body_argument("email", ""), self.get_body_argument("domain", "")
        try:
            result = await signup.signup(self.services, signup.SignupRequest(email=email, domain=domain))
        except ApiError as exc:
            self.set_status(exc.status)
            base_url = self.services.config.server.base_url
            self.render_page("home.html", base_url=base_url, error=refusal_text(exc), email=email, domain=domain)
            return
        created = result if isinstance(result, signup.SignedUp) else None
        next_path = urlsplit(created.portal_url).path if created else "/domains"
        # Post/redirect/get: the answer page reads what happened from a signed cookie, so a reload
        # of it signs nobody up again.
        shown = {"email": result.user_email, "apex": created.domain.apex if created else None,
                 "login": "/login?" + urlencode({"next": next_path, "login_hint": result.user_email})}
        self.set_signed_cookie(SIGNED_UP_COOKIE, json.dumps(shown), expires_days=1 / 24, httponly=True,
                               samesite="Lax", secure=self.secure_cookies)
        self.redirect("/signup/done", status=303)


class SignedUpPage(PageHandler):
    async def get(self) -> None:
        sealed = self.get_signed_cookie(SIGNED_UP_COOKIE, max_age_days=1)
        if sealed is None:
            self.redirect("/signup")
            return
        self.clear_cookie(SIGNED_UP_COOKIE)  # shown once: not to whoever uses this browser next
        self.render_page("signed_up.html", shown=json.loads(sealed))


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
            self.set_status(400)
            self.render_page("signin.html", error="This sign-in link is stale, was already used, or was not started here. Start again.")
            return
        if self.get_argument("error", None) or not self.get_argument("code", None):
            self.set_status(400)
            self.render_page("signin.html", error=f"The identity provider did not sign you in ({self.get_argument('error', 'no code')}).")
            return
        request = signin.ExchangeRequest(code=self.get_argument("code"), code_verifier=pending.verifier, nonce=pending.nonce)
        try:
            result = await signin.exchange(self.services, request)
        except ApiError as exc:
            self.set_status(exc.status)
            self.render_page("signin.html", error=exc.message)
            return
        self.set_signed_cookie(
            SESSION_COOKIE, result.token, expires_days=result.expires_in_seconds / 86400, httponly=True, samesite="Lax",
            secure=self.secure_cookies,
        )
        self.redirect(pending.next_path)  # a clean URL: a reload does not replay the code


class LogoutHandler(PageHandler):
    async def post(self) -> None:
        # Everything this browser holds about the person goes, for whoever uses it next.
        for cookie in (SESSION_COOKIE, FLASH_COOKIE, SIGNED_UP_COOKIE, forms.REVEAL_COOKIE):
            self.clear_cookie(cookie)
        self.redirect("/", status=303)


class PageNotFoundHandler(PageHandler):
    async def prepare(self) -> None:
        await super().prepare()  # the page knows who is signed in, and offers what they can do
        raise HTTPError(404)


routes = [
    (r"/", HomeHandler),
    (r"/signup", SignupPageHandler),
    (r"/signup/done", SignedUpPage),
    (r"/login", LoginHandler),
    (r"/auth/callback", CallbackHandler),
    (r"/logout", LogoutHandler),
]
