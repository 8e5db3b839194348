"""One action per intent: the portal's forms and what a double click or a resubmission does.

Every portal form carries a one-time token (``intent``), sealed by the service and bound to the
signed-in person and the workspace shown; a form without one is refused as a stale one is. The first POST with a token claims it in the same records as the API's
``Idempotency-Key`` (under a ``FORM`` method, so no API request can meet them), runs the action
and stores its outcome: where to go next, what to say, and a secret to show once if it made one
(encrypted). A second POST with the token (a double click, a reload of the answer, the back
button and submit again) runs nothing: it waits for the first to finish and answers as it did,
so a double click on "Create key" creates one key and the page shown still has its secret.

Every answer is a redirect (post/redirect/get): reloading the page after it repeats nothing.
A secret travels to that page in an encrypted cookie, read once and cleared; the stored copy is
dropped by the purge job after ``REVEAL_SECONDS``.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import attrs
from tornado.web import HTTPError

from core.certificates import idempotency
from core.errors import Conflict

if TYPE_CHECKING:
    from tornado.httputil import HTTPServerRequest

    from core.identity.auth import Principal
    from core.services import Services
    from store.records import User

#: How long a rendered form can be submitted; a form older than that is answered "reload".
FORM_SECONDS = 24 * 3600
#: How long a duplicate submission can still be shown the secret the first one made (the stored
#: copy is dropped by the purge job soon after).
REVEAL_SECONDS = int(idempotency.FORM_SECRET_RETENTION.total_seconds())
#: How long a duplicate waits for the first submission to finish before answering "in progress".
WAIT_SECONDS = 15.0
REVEAL_COOKIE = "cps_reveal"
FIELD = "intent"
_SEAL = "portal-form"
_REVEAL = "portal-reveal"


class FormPage(Protocol):
    """What a form's action needs of the page that received it (handlers/portal/pages.py's ``PageHandler``)."""

    services: Services
    user: User | None
    principal: Principal | None
    request: HTTPServerRequest

    def get_body_argument(self, name: str, default: None, strip: bool = ...) -> str | None: ...

    def get_body_arguments(self, name: str) -> list[str]: ...


@attrs.frozen
class Outcome:
    """What an action did, as the person sees it: the page to go to, a message for it, and a
    secret to show there once (a new API key, a webhook signing secret)."""

    location: str
    message: str | None = None
    secret: str | None = None


class StaleForm(HTTPError):
    """A form that may not act: more than a day old or someone else's (``why = "old"``), or shown
    for another workspace than the one shown now (``why = "workspace"``: switched in another tab)."""

    def __init__(self, why: str) -> None:
        super().__init__(400, reason="This form is out of date")
        self.why = why


def new_token(services: Services, user_id: str, workspace_id: str) -> str:
    issued = int(services.clock.now().timestamp())
    payload = {"u": user_id, "w": workspace_id, "t": issued, "n": secrets.token_urlsafe(12)}
    return services.keyring.seal(_SEAL, payload)


def check_token(services: Services, token: str, *, user_id: str, workspace_id: str | None) -> None:
    """``StaleForm`` unless the token is this person's, under a day old and, when ``workspace_id``
    is given, made for that workspace: a form acts where it was shown, never in another."""
    payload = services.keyring.unseal(_SEAL, token)
    now = services.clock.now().timestamp()
    if payload is None or payload.get("u") != user_id or not isinstance(payload.get("t"), int) \
            or now - payload["t"] > FORM_SECONDS:
        raise StaleForm("old")
    if workspace_id is not None and payload.get("w") != workspace_id:
        raise StaleForm("workspace")


async def run_once(handler: FormPage, action: Callable[[], Awaitable[Outcome]], *, in_workspace: bool = True) -> Outcome:
    """The action's outcome: run now, or the one a submission of the same form already had.
    ``in_workspace=False`` for a person's own forms (leave, accept, decline), which may act on
    another workspace than the one shown."""
    token = handler.get_body_argument(FIELD, None)
    if token is None or handler.user is None:  # the token is what says where the form was shown: none, no action
        raise StaleForm("old")
    user_id = str(handler.user.id)
    check_token(handler.services, token, user_id=user_id,
                workspace_id=str(handler.principal.workspace_id) if in_workspace and handler.principal else None)
    # The account page's answers to invitations for a person in no workspace yet act each time:
    # there is no workspace to keep the record in, and answering twice is harmless.
    if handler.principal is None:
        return await action()
    services = handler.services
    # The form's values are part of the intent: a page's forms share one token, so the same row's
    # form sent again with another choice (a different role, say) is a new intent, not a duplicate.
    values = {name: handler.get_body_arguments(name) for name in sorted(handler.request.body_arguments)
              if name not in (FIELD, "_xsrf")}
    key = idempotency.IdempotencyKey(method="FORM", path=f"{handler.request.path}#{idempotency.fingerprint(values)}",
                                     key=token, fingerprint=user_id)
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            begun = await services.store.run(idempotency.begin, services, workspace_id=handler.principal.workspace_id,
                                             key=key)
        except Conflict as exc:
            if exc.code != "idempotency_in_progress" or time.monotonic() > deadline:
                raise HTTPError(409, reason="This form is being submitted already") from None
            await asyncio.sleep(0.05)
            continue
        if isinstance(begun, idempotency.Replay):
            return _replayed(services, token, begun.body)
        break
    try:
        outcome = await action()
    except BaseException:
        await services.store.run(idempotency.release, services, begun)
        raise
    until = services.clock.now().timestamp() + REVEAL_SECONDS
    stored: dict[str, object] = {"location": outcome.location, "message": outcome.message, "until": until}
    if outcome.secret is not None:  # "secret" is dropped by the purge, "made_secret" stays
        stored.update(made_secret=True, secret=services.keyring.encrypt(_REVEAL, outcome.secret, bound_to=token))
    await services.store.run(_complete, services, begun, json.dumps(stored))
    return outcome


def _complete(services: Services, claim: idempotency.Claim, body: str) -> None:
    """A unit of work: the form's outcome kept, for a second submission to answer with."""
    with services.store.transaction():
        idempotency.complete(services, claim, status_code=303, body=body)


def _replayed(services: Services, token: str, body: str) -> Outcome:
    stored = json.loads(body)
    secret = None
    if "secret" in stored and services.clock.now().timestamp() <= stored["until"]:
        secret = services.keyring.decrypt(_REVEAL, stored["secret"], bound_to=token)
    message = stored["message"] or "Done."
    if stored.get("made_secret") and secret is None:
        message += " (This form was sent twice; the secret was shown the first time.)"
    return Outcome(location=stored["location"], message=message, secret=secret)
