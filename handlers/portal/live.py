"""What a domain's page polls while the domain waits on a background check: its status line and
"Where things stand", as an HTML fragment rendered from the same macros as the page
(templates/_standing.html), which static/portal.js puts in place of the page's own.

The page names this address only while something waits on a check (``awaited_check``), and the
fragment says again whether it still does, with the seconds until that check: the script polls
just after each check, backs off while a check is late, and stops once nothing waits. Without
JavaScript the page is the same, and a reload shows the same. Each poll counts in the bucket of
the page it refreshes: the API's for the DNS page, the public links' for a link's page.
"""

from __future__ import annotations

from typing import Any

from tornado.web import authenticated

from core.domains import shape
from core.edge.words import provider_words
from core.identity.scopes import WRITERS
from handlers.portal.base import LinkHolder, PortalHandler, awaited_check
from handlers.portal.pages import TEMPLATES, PageHandler


def render(page: PageHandler, shown: Any, url: str, *, can_check: bool, diagnose_url: str | None = None) -> None:
    """The fragment; not through ``render_page``, which would use up a flash meant for a page.
    ``diagnose_url``: the DNS page's "Diagnose" button, whose words follow the domain's status."""
    page.set_header("Content-Type", "text/html; charset=UTF-8")
    page.finish(TEMPLATES.get_template("live.html").render(
        d=shown, lifecycle=page.services.config.lifecycle, simulated=page.simulated(),
        poll=awaited_check(page.services, shown, url), can_check=can_check,
        provider=provider_words(page.services.config.provider), diagnose_url=diagnose_url,
    ))


class DnsStatus(PortalHandler):
    """``/site/<domain_id>/status``: the DNS page's refreshing parts."""

    @authenticated
    async def get(self, domain_id: str) -> None:
        await self.hit_rate_limit("/v1/domains")
        row = self.domain_row(domain_id)
        can_check = self.member().role in WRITERS
        render(self, shape.present(row), f"/site/{row.id}/status", can_check=can_check,
               diagnose_url=f"/site/{row.id}/dns?diagnose=1#diagnosis" if can_check else None)


class LinkStatus(LinkHolder):
    """``/verify/<token>/status``: the same for a verification link's page (the token is the credential)."""

    async def get(self, token: str) -> None:
        view = await self.view_or_explain(token)
        if view is not None:
            render(self, view, f"/verify/{token}/status", can_check=True)


routes = [
    (r"/site/([^/]+)/status", DnsStatus),
    (r"/verify/([^/]+)/status", LinkStatus),
]
