"""One-click DNS set-up in the portal (core/verification/one_click.py): the button on the DNS page
and on a verification link's page, and the page the customer's DNS host sends them back to.

The button is a POST that answers 303 to a fresh apply URL at the DNS host. It is not an ``act``
form: it changes nothing that a second click would repeat (each click is a new, one-use start),
and its answer must be a new URL each time. The state also goes into a cookie of this browser,
since some DNS hosts (Cloudflare) do not send it back.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable

from tornado.web import HTTPError, authenticated

from core.errors import ApiError
from core.identity.scopes import WRITERS
from core.verification import one_click
from handlers.portal.base import PortalHandler
from handlers.portal.pages import PageHandler, refusal_text

COOKIE = "cps_one_click"


class _Starting(PageHandler):
    async def go(self, starting: Awaitable[one_click.OneClickUrl], back: str) -> None:
        """To the DNS host's consent page, the state kept in this browser too; or ``back``, saying why not."""
        try:
            started = await starting
        except ApiError as exc:
            self.flash(refusal_text(exc))
            self.redirect(back, status=303)
            return
        cookie = json.dumps({"state": started.state, "back": back})
        self.set_signed_cookie(COOKIE, cookie, expires_days=one_click.STATE_LIFETIME.total_seconds() / 86400,
                               httponly=True, samesite="Lax", secure=self.secure_cookies)
        self.redirect(started.url, status=303)


class OneClickStart(_Starting, PortalHandler):
    """``POST /site/<id>/one-click``: the DNS page's "Set up automatically at <DNS host>"."""

    @authenticated
    async def post(self, domain_id: str) -> None:
        await self.hit_rate_limit("/v1/domains")
        row = self.domain_row(domain_id)
        principal = self.member(WRITERS)
        await self.go(one_click.start(self.services, workspace=principal.workspace, domain_id=row.id,
                                      started_by=principal.label), f"/site/{row.id}/dns")


class PublicOneClickStart(_Starting):
    """``POST /verify/<token>/one-click``: the same button on a verification link's page."""

    async def post(self, token: str) -> None:
        await self.hit_rate_limit("/v1/public/verification-links/")
        await self.go(one_click.start_for_link(self.services, token), f"/verify/{token}")


class OneClickReturn(PageHandler):
    """``/connect/done``: where the DNS host sends the customer back (``redirect_uri``).

    Any site can send a browser here, so a visit uses up a set-up only when it brings its ``state``
    back (only the DNS host and the starting browser have it), and clears this browser's cookie
    only when it is that browser's state. A visit without a state changes nothing: when this
    browser started a set-up (its DNS host sends no state back, as Cloudflare does), the page offers
    to check it, with a POST no other site can make. Anyone can put text in this URL, so what the
    DNS host says (``error``, ``error_description``) is shown only to the browser that started the
    set-up, marked as the DNS host's words. Then this service's own DNS check says whether the
    records are there.
    """

    async def head(self) -> None:
        """Not GET without a body: GET uses up the state, and HEAD must change nothing."""
        raise HTTPError(405)

    async def get(self) -> None:
        await self.hit_rate_limit("/v1/public/verification-links/")
        state, kept = self.get_query_argument("state", ""), self._kept()
        if not state:
            self.set_status(200 if kept else 400)
            self.render_page("connect_done.html", returned=one_click.Return("no_state"), pending=bool(kept),
                             back=kept.get("back"))
            return
        started_here = bool(kept) and hmac.compare_digest(kept["state"].encode(), state.encode())
        said, more = (self.get_query_argument("error", ""), self.get_query_argument("error_description", "")) \
            if started_here else ("", "")
        await self._finish(state, said or None, more[:200], back=kept.get("back") if started_here else None,
                           clear=started_here)

    async def post(self) -> None:
        """The check of the set-up this browser started, when its DNS host did not say which one."""
        await self.hit_rate_limit("/v1/public/verification-links/")
        kept = self._kept()
        if not kept:
            self.set_status(400)
            self.render_page("connect_done.html", returned=one_click.Return("no_state"), pending=False, back=None)
            return
        await self._finish(kept["state"], None, "", back=kept.get("back"), clear=True)

    async def _finish(self, state: str, said: str | None, more: str, *, back: str | None, clear: bool) -> None:
        returned = await one_click.finish(self.services, state=state, error=said)
        if clear:
            self.clear_cookie(COOKIE)
        if returned.outcome != "checked":
            self.set_status(400)
        self.render_page("connect_done.html", returned=returned, back=back, pending=False, host_said_more=more)

    def _kept(self) -> dict[str, str]:
        """The state this browser started a set-up with (and the page it started from), or {}."""
        raw = self.get_signed_cookie(COOKIE, max_age_days=1)
        try:
            kept = json.loads(raw) if raw else {}
        except ValueError:
            return {}
        return kept if isinstance(kept, dict) and isinstance(kept.get("state"), str) and kept["state"] else {}


routes = [
    (r"/site/([^/]+)/one-click", OneClickStart),
    (r"/verify/([^/]+)/one-click", PublicOneClickStart),
    (r"/connect/done", OneClickReturn),
]
