"""``/simulated-dns-host/...``: the stand-in DNS host of a local trial (core/domain_connect/simulated.py),
routed only with ``[domain_connect] simulate = true``.

It answers the apply URL the one-click button sends the browser to, as a Domain Connect DNS host's
consent screen does: GET shows what would be added (or why the request is refused, changing
nothing), and the form posts the query back exactly as received, so the signature is checked again
on the request that applies. "Connect" applies the records to the simulated DNS and sends the
browser to ``redirect_uri`` with ``state``; "Cancel" sends it there with ``error=access_denied``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from core.domain_connect import simulated
from handlers.portal.pages import PageHandler


class SimulatedApply(PageHandler):
    async def get(self, provider_id: str, service_id: str) -> None:
        await self.hit_rate_limit("/v1/public/verification-links/")
        query = self.request.query
        applying = self._checked(provider_id, service_id, query)
        if applying is not None:
            self.render_page("simulated_dns_host.html", applying=applying, refused=None, query=query,
                             host_name=simulated.HOST_NAME)

    async def post(self, provider_id: str, service_id: str) -> None:
        await self.hit_rate_limit("/v1/public/verification-links/")
        applying = self._checked(provider_id, service_id, self.get_body_argument("query", ""))
        if applying is None:
            return
        if self.get_body_argument("decision", "") != "connect":
            self.redirect(applying.back(error="access_denied"), status=303)
            return
        await self.services.store.run(simulated.apply, self.services.store, applying, self.services.clock.now())
        self.redirect(applying.back(), status=303)

    def _checked(self, provider_id: str, service_id: str, query: str) -> simulated.Apply | None:
        """The request checked; else None, the page saying why it is refused (400) rendered."""
        discoverer, key = self.services.domain_connect, self.services.domain_connect_key
        assert discoverer is not None and key is not None  # routed only while simulated
        try:
            return simulated.checked(query, provider_id, service_id, config=discoverer.config, key=key.public_key(),
                                     redirect_host=urlsplit(self.services.config.server.portal_url).hostname or "")
        except simulated.Refused as exc:
            self.set_status(400)
            self.render_page("simulated_dns_host.html", applying=None, refused=str(exc), query="",
                             host_name=simulated.HOST_NAME)
            return None


routes = [
    (rf"{simulated.PATH}/v2/domainTemplates/providers/([^/]+)/services/([^/]+)/apply", SimulatedApply),
]
