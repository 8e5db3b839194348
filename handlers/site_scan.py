"""``/v1/site-scan/https``: the live TLS check of a hostname (core/outbound/site_scan.py)."""

from __future__ import annotations

from core.identity.scopes import ROLES
from core.outbound import site_scan
from handlers.base import ApiHandler, require


class HttpsScanHandler(ApiHandler):
    @require(scopes=(), roles=ROLES, optional=True)
    async def post(self) -> None:
        """Optional bearer, no scope needed; a bearer that is sent must be valid."""
        request = self.body(site_scan.ScanRequest)
        workspace = self.principal.workspace if self.principal is not None else None
        self.send_json(await site_scan.scan_https(self.services, request, workspace))


routes = [
    (r"/v1/site-scan/https", HttpsScanHandler),
]
