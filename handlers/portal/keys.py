"""API keys, for owners and admins: the list, creating one (its secret shown once), and rotating
or revoking one after a page that names the key and says what happens, as deleting a domain, a
webhook or a member does: the confirmation a browser without JavaScript can show. Each calls the
core function of its API call (``/v1/api-keys``), in that call's rate-limit bucket.
"""

from __future__ import annotations

import datetime as dt

from tornado.web import HTTPError, authenticated

from core.errors import ApiError, NotFound
from core.identity import api_keys
from core.identity.auth import Principal
from core.identity.scopes import MANAGERS, SCOPES
from handlers.portal.base import PortalHandler, path_id
from handlers.portal.forms import Outcome
from handlers.portal.pages import refusal_text
from store.records import ApiKey

KEYS = "/account/keys"


def expiry_of(day: str) -> dt.datetime | None:
    """The form's date (``YYYY-MM-DD``, what a date field sends) as the API's ``expiresAt``: 00:00
    UTC that day, the moment the key stops working; empty: it never expires. ValueError: no date."""
    if not day:
        return None
    return dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), tzinfo=dt.UTC)


class KeysPage(PortalHandler):
    @authenticated
    async def get(self) -> None:
        principal = self.member(MANAGERS)
        error, typed = self.refused()
        keys = await self.services.store.run(api_keys.list_keys, self.services, workspace_id=principal.workspace_id)
        # Shown here once, never stored in clear: the page is not cached (Cache-Control: no-store).
        self.render_page("keys.html", keys=keys, scopes=list(SCOPES), secret=self.revealed_secret(), error=error,
                         name=typed.get("name", ""), expires_on=typed.get("expiresOn", ""), unscoped=typed.get("unscoped"))

    @authenticated
    async def post(self) -> None:
        await self.hit_rate_limit("/v1/api-keys")
        principal = self.member(MANAGERS)
        name, scopes, expires_on = self.typed("name"), self.typed_all("scopes"), self.typed("expiresOn")
        typed = {"name": name, "expiresOn": expires_on}
        try:
            expires_at = expiry_of(expires_on)
        except ValueError:
            self.refuse(KEYS, f"\u201c{expires_on}\u201d is not a date; the expiry is a day, as 2030-12-31.", typed)
            return
        if not scopes and self.get_body_argument("noScopes", "") != "yes":
            # Not refused: asked to confirm, since a key without scopes can do nothing.
            self.refuse(KEYS, None, {**typed, "unscoped": name})
            return

        async def create() -> Outcome:
            request = api_keys.CreateKeyRequest(name=name, scopes=scopes, expires_at=expires_at)
            key, secret = await self.services.store.run(api_keys.create, self.services, workspace_id=principal.workspace_id,
                                                        request=request)
            until = f" It works until {expires_on} 00:00 UTC." if expires_at else ""
            return Outcome(KEYS, f"The key \u201c{key.name}\u201d was created.{until}", secret=secret)

        try:
            await self.act(create)
        except ApiError as exc:
            expiry = getattr(exc, "field_errors", {}).get("expiresAt")
            # The API's words name its field; the form's, the day typed.
            said = f"the expiry, {expires_on} 00:00 UTC, must be in the future" if expiry else refusal_text(exc)
            self.refuse(KEYS, said, typed)


class KeyAction(PortalHandler):
    """``/account/keys/<id>/rotate`` and ``/revoke``: GET, the page asking to confirm; POST from
    that page, the action (``POST /v1/api-keys/:id/rotate`` or ``/revoke``)."""

    async def key(self, principal: Principal, key_id: str) -> ApiKey:
        wanted = path_id(key_id)
        keys = await self.services.store.run(api_keys.list_keys, self.services, workspace_id=principal.workspace_id)
        for key in keys:
            if key.id == wanted:
                return key
        raise HTTPError(404)

    @authenticated
    async def get(self, key_id: str, action: str) -> None:
        principal = self.member(MANAGERS)
        self.render_page("key_confirm.html", key=await self.key(principal, key_id), action=action)

    @authenticated
    async def post(self, key_id: str, action: str) -> None:
        await self.hit_rate_limit("/v1/api-keys")
        principal = self.member(MANAGERS)
        wanted = path_id(key_id)
        if self.get_body_argument("confirmed", "") != action:
            # Not sent from the confirmation page: nothing happens until it is confirmed there.
            self.redirect(f"{KEYS}/{wanted}/{action}", status=303)
            return

        async def rotate() -> Outcome:
            key, secret = await self.services.store.run(api_keys.rotate, self.services,
                                                        workspace_id=principal.workspace_id, key_id=wanted)
            if key.status != "active":  # the API rotates those too, and they stay as they were
                return Outcome(KEYS, f"The key \u201c{key.name}\u201d has a new secret but stays {key.status}.", secret=secret)
            return Outcome(KEYS, f"The key \u201c{key.name}\u201d has a new secret; the old secret stopped working at once. "
                                 "Its name, scopes and expiry are unchanged.", secret=secret)

        async def revoke() -> Outcome:
            await self.services.store.run(api_keys.revoke, self.services, workspace_id=principal.workspace_id,
                                          key_id=wanted)
            return Outcome(KEYS, "The key was revoked; requests using it now fail.")

        try:
            await self.act(rotate if action == "rotate" else revoke)
        except NotFound:
            raise HTTPError(404) from None


routes = [
    (KEYS, KeysPage),
    (rf"{KEYS}/([^/]+)/(rotate|revoke)", KeyAction),
]
