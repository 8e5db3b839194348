"""Server-rendered portal pages (Jinja2, autoescaped): the base page handler and the portal's words
(sign-up, sign-in and sign-out: handlers/portal/signin.py; the account page: handlers/portal/account.py).

A signed-in person's session is their OpenID Connect ID token, kept in a signed, HttpOnly,
SameSite=Lax cookie (``Secure`` when ``portal_url`` is https) and verified on every page exactly
as an API bearer is. Every form carries Tornado's XSRF token and, on a signed-in page, a one-time
token that makes it act once (handlers/portal/forms.py). A form answers with a redirect whatever
happened (post/redirect/get): what it did in a flash message, or what was refused, with what was
typed, in a cookie the page it leads to reads once (``refuse``). Pages load nothing from outside
the service and work without JavaScript; ``static/portal.js`` only adds copy buttons, disables a
form's buttons while it is sending, and refreshes a status that waits on a check.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Collection
from http.client import responses
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from markupsafe import Markup
from tornado.web import HTTPError

from core import logs
from core.certificates import results, states
from core.edge.words import provider_words
from core.errors import ApiError, NotFound
from core.identity import workspaces
from core.identity.auth import Caller, Principal, act_in, identify
from core.verification import checks, provider_findings
from core.wire import parse_uuid
from handlers.base import BaseHandler
from handlers.portal import forms
from store.records import User

if TYPE_CHECKING:
    import jinja2

SESSION_COOKIE = "cps_session"
WORKSPACE_COOKIE = "cps_workspace"
SIGNIN_COOKIE = "cps_signin"
FLASH_COOKIE = "cps_flash"
SIGNED_UP_COOKIE = "cps_signed_up"
SIGNIN_FAILED_COOKIE = "cps_signin_failed"
REFUSED_COOKIE = "cps_refused"
#: A refused form's values ride in a cookie; beyond this (browsers keep about 4 KB a cookie) only
#: the reason does, and the person types again.
REFUSED_MAX_BYTES = 2500

#: Status values as a customer reads them; the API's raw values stay in the API.
STATUS_WORDS = {"action_needed": "needs action", "none": "no certificate yet", "error": "has a problem",
                "read_only": "read-only"}
#: Roles as every page names them (the API's values are ``read_only`` etc.).
ROLE_WORDS = {"owner": "owner", "admin": "admin", "operator": "operator", "read_only": "read-only"}
#: What the core's messages tell an API client to call, and what the portal's pages say instead:
#: the words on their buttons ("Check now", "Diagnose"). The API keeps its words.
BUTTON_WORDS = (
    (states.VERIFY_AGAIN, "press \u201cCheck now\u201d"),
    (states.CHECK_AGAIN, "wait: the next check reads how far it has got"),
    (provider_findings.RECHECK, "press \u201cCheck now\u201d"),
    (results.DIAGNOSE_THEN_ISSUE, "check the delegation CNAME (\u201cDiagnose\u201d), then press \u201cCheck now\u201d"),
    (checks.DIAGNOSIS_POINTER, "The diagnosis names the exact fix: press \u201cDiagnose\u201d."),
)


def in_button_words(text: str | None) -> str | None:
    """A core message as a page says it, naming the page's buttons instead of API calls."""
    for api_words, page_words in BUTTON_WORDS:
        text = text.replace(api_words, page_words) if text else text
    return text


def _environment() -> jinja2.Environment:
    import jinja2

    templates = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).resolve().parents[2] / "templates"),
        autoescape=True,
    )
    templates.filters["words"] = lambda status: STATUS_WORDS.get(status, status)
    templates.filters["role"] = lambda role: ROLE_WORDS.get(role, role)
    # A clause as a sentence (Jinja's ``capitalize`` would lower-case the rest: "Let's Encrypt").
    templates.filters["capitalize_first"] = lambda text: str(text)[:1].upper() + str(text)[1:]
    # A time as pages show it; to the second where a check is awaited (checks are a minute apart).
    templates.filters["utc"] = lambda moment, seconds=False: moment.strftime(
        "%Y-%m-%d %H:%M" + (":%S" if seconds else "") + " UTC")
    # A long hostname wraps between its labels, never inside one (``<wbr>`` copies as nothing);
    # templates keep the plain value in a ``data-value`` attribute too, for scripts that read the page.
    templates.filters["breakable"] = lambda name: Markup("<wbr>.").join(str(name).split("."))
    templates.filters["button_words"] = in_button_words
    return templates


class _Templates:
    """The portal's templates, their Jinja environment made when the first page is rendered: Jinja's
    import was a twentieth of every start-up, which a client of the API waited for (issue 49)."""

    _environment: jinja2.Environment | None = None

    def get_template(self, name: str) -> jinja2.Template:
        if self._environment is None:
            self._environment = _environment()
        return self._environment.get_template(name)


TEMPLATES = _Templates()

#: Nothing from elsewhere, no framing (clickjacking), no inline script.
_CSP = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"


class _RateLimited(HTTPError):
    """A page's 429, with the seconds until its bucket refills (its ``Retry-After``)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(429)
        self.retry_after = retry_after


class NotAllowed(HTTPError):
    """A 403 page that says why: the role it needs, or that one must sign in."""

    def __init__(self, explanation: str) -> None:
        super().__init__(403)
        self.explanation = explanation


def needs_role(principal: Principal, roles: Collection[str]) -> NotAllowed:
    """The 403 of a role that may not do this, naming the roles that may."""
    named = [ROLE_WORDS[role] for role in roles]
    either = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " or " + named[-1]
    return NotAllowed(f"Only an {either} of {principal.workspace.name} may do this; you are "
                      f"{ROLE_WORDS.get(principal.role or '', principal.role)} there.")


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
            return parse_uuid(chosen.decode()) if chosen else None
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

    def flash(self, message: str, *, near: str | None = None) -> None:
        """A message for the next page shown (after a redirect); ``near``: the id of the element it is
        about, where that page shows it if it has it (a link's "Remind"), else at the top."""
        self.set_signed_cookie(FLASH_COOKIE, json.dumps({"message": message, "near": near}), expires_days=None,
                               httponly=True, samesite="Lax", secure=self.secure_cookies)

    def refuse(self, location: str, reason: str | None, typed: dict[str, Any] | None = None) -> None:
        """A refused form: back to the page showing it (303, so a reload sends nothing again and
        the address bar holds a page), which shows the reason with what was typed (``refused``)."""
        kept = {"at": urlsplit(location).path, "reason": reason, "typed": typed or {}}
        if len(json.dumps(kept)) > REFUSED_MAX_BYTES:
            kept["typed"] = {}
        self.set_signed_cookie(REFUSED_COOKIE, json.dumps(kept), expires_days=None, httponly=True, samesite="Lax",
                               secure=self.secure_cookies)
        self.redirect(location, status=303)

    def refused(self) -> tuple[str | None, dict[str, Any]]:
        """The reason and the typed values of a form this page's address was refused for, once."""
        raw = self.get_signed_cookie(REFUSED_COOKIE, max_age_days=1)
        if raw is None:
            return None, {}
        self.clear_cookie(REFUSED_COOKIE)
        kept = json.loads(raw)
        if kept.get("at") != self.request.path:  # left behind by a page never shown: not this one's
            return None, {}
        return kept.get("reason"), kept.get("typed") or {}

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

    def render_page(self, template: str, /, *, anchors: Collection[str] = (), **context: Any) -> None:
        """The page ``template``; ``anchors``: the ids of its elements a flash message may be shown by."""
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        flash = self.get_signed_cookie(FLASH_COOKIE, max_age_days=1)
        if flash is not None:
            self.clear_cookie(FLASH_COOKIE)
            try:
                flashed = json.loads(flash)
            except ValueError:  # set by a version before "near": the message alone
                flashed = {"message": flash.decode(), "near": None}
            context.setdefault("flash", flashed["message"])
            context.setdefault("flash_near", flashed["near"] if flashed["near"] in anchors else None)
        context.setdefault("principal", self.principal)
        context.setdefault("user", self.user)
        context.setdefault("flash", None)
        context.setdefault("flash_near", None)
        context.setdefault("simulated", self.simulated())
        context.setdefault("provider", provider_words(self.services.config.provider))
        if self.caller is not None and self.user is not None and "switcher" not in context:
            # The header's workspace switcher, from the workspaces read with the person (prepare).
            context["switcher"] = workspaces.listed(self.caller.memberships)
        context.setdefault("here", self.request.path)
        context["xsrf"] = Markup(self.xsrf_form_html())
        if self.user is not None:  # every form of a signed-in page: one action per intent
            shown = str(self.principal.workspace_id) if self.principal is not None else ""
            token = forms.new_token(self.services, str(self.user.id), shown)
            context["xsrf"] += Markup('<input type="hidden" name="{}" value="{}">').format(forms.FIELD, token)
        self.finish(TEMPLATES.get_template(template).render(**context))

    def simulated(self) -> dict[str, Any] | None:
        """What the sandbox simulates, for the banner every page shows: certificates, and DNS records
        too with ``simulate_dns``; None with a real edge provider."""
        provider = self.services.config.provider
        if provider.kind != "sandbox":
            return None
        sandbox = provider.sandbox
        return {"dns": sandbox.simulate_dns, "dns_delay": sandbox.simulate_dns_delay_seconds}

    def typed(self, name: str, default: str = "", *, query: bool = False) -> str:
        """A form field (or with ``query``, a query argument) exactly as sent, its last value.

        Pages read what people type through this, never ``get_argument``: Tornado's strips white
        space from the ends (NBSP, U+0085, U+2028 and U+3000 too) and turns control characters into
        spaces, so a page would pass on, cleaned, text the API refuses; the core's rules
        (core/text.py) must see what was typed, and refuse it as they refuse it from the API."""
        values = self.typed_all(name, query=query)
        return values[-1] if values else default

    def typed_all(self, name: str, *, query: bool = False) -> list[str]:
        """Every value of a form field (or with ``query``, a query argument), exactly as sent."""
        source = self.request.query_arguments if query else self.request.body_arguments
        return [self.decode_argument(value, name=name) for value in source.get(name, [])]

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
            explanation=error.explanation if isinstance(error, NotAllowed) else None,
            retry_after=retry_after,
        )


class PageNotFoundHandler(PageHandler):
    async def prepare(self) -> None:
        await super().prepare()  # the page knows who is signed in, and offers what they can do
        raise HTTPError(404)
