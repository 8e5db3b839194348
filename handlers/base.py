"""The base handlers: everything every request shares lives here and only here.

``ApiHandler`` parses JSON, counts the request against its rate-limit buckets before anything
else, resolves the bearer once, enforces the per-method ``@require`` declarations and writes
every error in the spec's envelope ``{status, code, message, details?}``.
"""

from __future__ import annotations

import email.utils
import functools
import json
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Collection
from http.client import responses
from typing import Any, TypeVar

from tornado.httputil import HTTPHeaders
from tornado.web import HTTPError, RequestHandler

from core import logs
from core.errors import (
    ApiError,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    StorageUnavailable,
    Unauthorized,
    ValidationError,
)
from core.identity.auth import Caller, Principal, act_in, authorize, cached_key, check_scope_names, identify
from core.identity.scopes import READERS, ROLES
from core.ratelimit import Decision, client_ip
from core.services import Services
from core.text import shown
from core.wire import dumps, parse_uuid, structure_body
from handlers.log import shown_path
from store import unavailable_reason
from store.records import User

log = logging.getLogger(__name__)
T = TypeVar("T")

REQUEST_ID_HEADER = "X-Request-Id"
#: Names the workspace a person's request acts in (default: the one they joined first).
WORKSPACE_HEADER = "X-Workspace-Id"
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


_date: tuple[int, str] = (-1, "")


def http_date() -> str:
    """The ``Date`` header's value now (whole seconds, as HTTP writes it), formatted once a second."""
    global _date  # one value, replaced whole, on the event loop's thread
    if _date[0] != (now := int(time.time())):
        _date = (now, email.utils.formatdate(now, usegmt=True))
    return _date[1]


def sent(headers: HTTPHeaders, name: str) -> str | None:
    """A request header, or None when it was not sent. Not ``headers.get``: Tornado's headers raise
    and catch a KeyError for each header missing, and most requests send neither of these."""
    return headers[name] if name in headers else None  # noqa: SIM401 - see above


class BaseHandler(RequestHandler):
    """Shared by the JSON API and the portal pages."""

    services: Services
    #: Requests being handled in this process, so that a shutdown lets them finish (app.drain).
    #: Counted from ``initialize`` to ``on_finish``, which Tornado calls once a request ends,
    #: whether answered or failed (its error path also finishes). Not by wrapping ``_execute`` in
    #: a coroutine of ours: that layer cost a simple GET several per cent of its throughput.
    in_flight = 0

    def initialize(self, services: Services) -> None:
        BaseHandler.in_flight += 1
        self._counted = True
        self.services = services
        self.request_id = os.urandom(16).hex()  # 128 random bits, as a uuid4 without its cost
        # Every log line of this request carries its id and, once known, its workspace.
        logs.request_id.set(self.request_id)
        logs.workspace.set(None)
        self.principal: Principal | None = None
        self.rate_decision: Decision | None = None
        self._client_ip: str | None = None
        # Default headers were set before this id existed (Tornado calls clear() first).
        self._headers[REQUEST_ID_HEADER] = self.request_id

    def on_finish(self) -> None:
        if self._counted:
            self._counted = False
            BaseHandler.in_flight -= 1

    def clear(self) -> None:
        """Tornado's, without checking its constant headers against the header grammar on every
        request, with the date formatted once a second (issue 49 item 3), and with no ``Server``
        header (no software version for scanners to match)."""
        headers = HTTPHeaders()
        headers["Content-Type"] = "text/html; charset=UTF-8"
        headers["Date"] = http_date()
        self._headers = headers
        self.set_default_headers()
        self._write_buffer = []
        self._status_code = 200
        self._reason = "OK"

    def set_default_headers(self) -> None:
        # Also called by clear() before an error page, so headers that must survive errors
        # (request id, rate limits) are set here as well as in prepare().
        # Values made here, never from the request, go straight into the headers: Tornado's
        # set_header checks each value for control characters, a cost paid on every request.
        self._headers["X-Content-Type-Options"] = "nosniff"
        request_id = getattr(self, "request_id", None)
        if request_id:
            self._headers[REQUEST_ID_HEADER] = request_id
        decision = getattr(self, "rate_decision", None)
        if decision is not None:
            self._headers["RateLimit-Policy"] = decision.policy
            self._headers["RateLimit"] = decision.limit_header()

    @property
    def client_ip(self) -> str:
        # Worked out once per request; not functools.cached_property, which takes a lock on
        # every first access before Python 3.12.
        if self._client_ip is None:
            trusted = self.services.trusted_proxies
            peer = self.request.remote_ip or ""
            # Without trusted proxies X-Forwarded-For is never believed: not even looked for.
            self._client_ip = client_ip(peer, sent(self.request.headers, "X-Forwarded-For"), trusted) if trusted else peer
        return self._client_ip

    def send_error(self, status_code: int = 500, **kwargs: Any) -> None:
        # A database that cannot be written (read-only, disk full) is the machine's state, not a
        # bug: 503 with Retry-After, in the envelope, instead of a 500.
        why = unavailable_reason(kwargs.get("exc_info", (None, None, None))[1])
        if why is not None:
            converted = StorageUnavailable(why)
            kwargs["exc_info"] = (StorageUnavailable, converted, None)
            status_code = converted.status
        super().send_error(status_code, **kwargs)

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        """Like Tornado's, but paths go through ``shown_path``: verification-link tokens travel in
        paths, and a 403 for a missing XSRF token must not write one into the log."""
        if isinstance(value, ApiError):
            return  # an expected refusal; the access log records it
        why = unavailable_reason(value)
        if why is not None:
            log.error("storage unavailable (%s), request id %s: %s", why, self.request_id, value)
            return
        if isinstance(value, HTTPError) and value.status_code < 500:
            if value.log_message:
                log.warning("%d %s %s: %s", value.status_code, self.request.method, shown_path(self.request.path),
                            value.log_message % value.args)
            return
        log.error(
            "unhandled error, request id %s: %s %s",
            self.request_id, self.request.method, shown_path(self.request.path), exc_info=(typ, value, tb),
        )

    async def head(self, *args: Any, **kwargs: Any) -> None:
        """HEAD is GET without the body (Tornado drops it), on the API, the pages and ``/metrics``;
        on a route without GET it is a 405, which each kind of handler answers with ``Allow``."""
        if type(self).get is RequestHandler.get:
            raise HTTPError(405)
        answered = self.get(*args, **kwargs)
        if answered is not None:
            await answered

    def allowed_methods(self) -> list[str]:
        base = RequestHandler
        return [m for m in _METHODS if getattr(type(self), m.lower()) is not getattr(base, m.lower())]


class ApiHandler(BaseHandler):
    """Base of every ``/v1/`` handler."""

    def initialize(self, services: Services) -> None:
        super().initialize(services)
        self._auth_error: ApiError | None = None
        self.caller: Caller | None = None

    def set_default_headers(self) -> None:
        super().set_default_headers()
        self._headers["Content-Type"] = "application/json; charset=UTF-8"
        # Responses may carry secrets shown once; no cache may keep them.
        self._headers["Cache-Control"] = "no-store"

    def compute_etag(self) -> None:
        """No ETags: answers are ``no-store`` and often carry secrets; a 304 would only confuse."""

    def set_etag_header(self) -> None:
        """No ETag, without asking ``compute_etag`` on every GET."""

    def check_etag_header(self) -> bool:
        """Never a 304, without Tornado's look for an ``Etag`` never set (a KeyError caught) on every GET."""
        return False

    def decode_argument(self, value: bytes, name: str | None = None) -> str:
        # A path id that is not UTF-8 names nothing: it reaches parse_id and is a 404, like any malformed
        # id, instead of Tornado's bare 400. Bytes (path ids) are decoded here, without Tornado's two calls.
        if type(value) is not bytes:
            return super().decode_argument(value, name)
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.decode("utf-8", "replace")

    def check_xsrf_cookie(self) -> None:
        """No XSRF check: the API reads credentials from the Authorization header only, never from
        cookies, so a cross-site form cannot act with a visitor's credentials."""

    async def prepare(self) -> None:
        # Admission before authentication: a flood of bad credentials is throttled too. Counted in
        # memory (SQLite), it is a plain call: no coroutine made and awaited on every request.
        limiter = self.services.limiter
        if limiter.in_memory:
            decision = self.rate_decision = limiter.hit(self.request.path, self.client_ip)
        else:
            decision = self.rate_decision = await limiter.admit(self.request.path, self.client_ip)
        if decision is not None:
            self._headers["RateLimit-Policy"] = decision.policy
            self._headers["RateLimit"] = decision.limit_header()
            if decision.exceeded is not None:
                raise RateLimited(decision.exceeded.reset, decision.exceeded.bucket)
        if (header := sent(self.request.headers, "Authorization")) is None:
            return
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            self._auth_error = Unauthorized("The Authorization header must be 'Bearer <token>'.")
            return
        try:
            entry = cached_key(self.services, token)
            if entry is not None:  # a key the cache answers alone: no coroutine, the same principal
                self.caller, workspace_id = entry.caller, self.chosen_workspace()
                self.principal = entry.principal if workspace_id is None else act_in(self.services, self.caller, workspace_id)
            else:  # at most one unit of work: a person is read with their workspaces, which act_in chooses from
                self.caller = await identify(self.services, token)
                self.principal = act_in(self.services, self.caller, self.chosen_workspace())
            logs.workspace.set(self.principal.workspace_text)
        except ApiError as exc:
            # Kept, not raised: a public endpoint ignores credentials it does not need.
            self._auth_error = exc

    def chosen_workspace(self) -> uuid.UUID | None:
        """The workspace named by the ``X-Workspace-Id`` header; a malformed one names none (404)."""
        value = sent(self.request.headers, WORKSPACE_HEADER)
        if value is None:
            return None
        try:
            return parse_uuid(value)  # Tornado has already taken the white space around it off
        except ValueError:
            raise NotFound("Workspace not found.") from None

    def person(self) -> User:
        """The signed-in person, whether or not they act in a workspace (their invitations, their
        workspaces): unlike ``authenticated()``, a session without a workspace is enough."""
        if self.caller is None:
            raise self._auth_error or Unauthorized()
        if self.caller.user is None:
            raise Forbidden("This is about a person's own account: it needs a session, not an API key.")
        return self.caller.user

    @property
    def has_credentials(self) -> bool:
        return "Authorization" in self.request.headers

    @property
    def authorized(self) -> Principal:
        """The principal a method under ``@require`` (not ``optional``) runs for: set before it runs."""
        assert self.principal is not None, "only for methods under @require"
        return self.principal

    def authenticated(self) -> Principal:
        """The caller, or the error that its credentials (or their absence) deserve."""
        if self._auth_error is not None:
            raise self._auth_error
        if self.principal is None:
            raise Unauthorized()
        return self.principal

    def json_body(self) -> Any:
        """The decoded JSON body (an empty body counts as ``{}``), parsed once per request."""
        if not hasattr(self, "_json_body"):
            raw = self.request.body  # at most 1 MiB: handlers/limits.py answers 413 above that
            if not raw:  # no body at all; white space alone is not JSON, so it is refused below
                self._json_body: Any = {}
            else:
                try:
                    self._json_body = json.loads(raw)
                except (ValueError, UnicodeDecodeError) as exc:
                    raise ValidationError(form_errors=[f"Malformed JSON body: {exc}"]) from None
                except RecursionError:
                    raise ValidationError(form_errors=["Malformed JSON body: nested too deeply"]) from None
        return self._json_body

    def body(self, cls: type[T]) -> T:
        """The JSON body structured into a request record: the only way a body reaches the rules.
        The record's text is checked (no NUL, no lone surrogate); fields it does not know are left
        behind unread, whatever they hold."""
        return structure_body(self.json_body(), cls)

    def send_json(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(dumps(data))

    def send_empty(self) -> None:
        self.set_status(204)
        self.clear_header("Content-Type")
        self.finish()

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, HTTPError) and exc.status_code == 405:
            exc = MethodNotAllowed()
        if isinstance(exc, ApiError):
            status, code, message, details = exc.status, exc.code, exc.message, exc.details
            for name, value in exc.headers.items():
                self.set_header(name, value)
            if isinstance(exc, MethodNotAllowed):
                self.set_header("Allow", ", ".join(self.allowed_methods()))
        elif isinstance(exc, HTTPError) and exc.status_code < 500:
            # HTTPError.log_message is for logs; clients get the stock reason phrase only.
            status = exc.status_code
            reason = responses.get(status, "Error")
            code, message, details = reason.lower().replace(" ", "_"), reason + ".", None
        else:
            status, code = 500, "internal_error"
            message = f"Internal server error. Quote request id {self.request_id} when reporting it."
            details = {"requestId": self.request_id}
        self.set_status(status)
        envelope: dict[str, Any] = {"status": status, "code": code, "message": message}
        if details is not None:
            envelope["details"] = details
        self.clear_header("Content-Length")
        try:
            body = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()
        except UnicodeEncodeError:  # text that is not valid Unicode echoed in a message: escape it
            body = json.dumps(envelope, separators=(",", ":")).encode()
        self.finish(body)


Method = Callable[..., Awaitable[None]]


def require(
    *, scopes: Collection[str] | None, roles: Collection[str] = READERS, optional: bool = False
) -> Callable[[Method], Method]:
    """Declare who may call a handler method.

    A session passes when its role is in ``roles``; an API key when it holds every scope in
    ``scopes`` (or ``*``). ``scopes=None`` marks owner/admin management that no key may do.
    ``optional=True`` lets a request without credentials through with ``principal = None``;
    credentials that are sent must still be valid, and an ``X-Workspace-Id`` that is sent must be a
    UUID either way (404, as for a person). Unknown scope or role names fail at import.
    """
    if scopes is not None:
        check_scope_names(scopes)
    unknown_roles = set(roles) - set(ROLES)
    if unknown_roles:
        raise ValueError(f"unknown roles {sorted(unknown_roles)}")

    def decorate(method: Method) -> Method:
        @functools.wraps(method)
        def wrapper(self: ApiHandler, *args: Any, **kwargs: Any) -> Awaitable[None]:
            # Not a coroutine itself: Tornado awaits what it returns, a refusal raised here is
            # handled as one raised inside, and no coroutine is made only to wrap another.
            if not (optional and not self.has_credentials):
                self.principal = authorize(self.authenticated(), scopes=scopes, roles=roles)
            else:  # no credentials, so no workspace to act in; a malformed header is still refused
                self.chosen_workspace()
            return method(self, *args, **kwargs)

        wrapper.requirement = {"scopes": scopes, "roles": tuple(roles)}  # type: ignore[attr-defined]
        return wrapper

    return decorate


def parse_id(value: str, what: str) -> uuid.UUID:
    """A path id; one that is not a UUID names nothing, so it is a 404 like an unknown one."""
    try:
        return parse_uuid(value)
    except ValueError:
        raise NotFound(f"{what} not found.") from None


class ApiNotFoundHandler(ApiHandler):
    """Any ``/v1/`` path without a route: counted by the rate limiter, then 404."""

    async def prepare(self) -> None:
        await super().prepare()
        raise NotFound(f"No endpoint {shown(f'{self.request.method} {self.request.path}')}.")
