"""``/v1/site-scan/https``: the live TLS check of a hostname (core/outbound/site_scan.py)."""

from __future__ import annotations

from core.identity.auth import permits
from core.identity.scopes import READERS, ROLES
from core.outbound import site_scan
from handlers.base import ApiHandler, require


class HttpsScanHandler(ApiHandler):
    @require(scopes=(), roles=ROLES, optional=True)
    async def post(self) -> None:
        """Optional bearer, no scope needed; a bearer that is sent must be valid. The comparison
        with the caller's own certificate is certificate data: only for those who may read it."""
        request = self.body(site_scan.ScanRequest)
        principal = self.principal
        reads_certificates = principal is not None and permits(principal, scopes=("certificates:read",), roles=READERS)
        workspace = principal.workspace if principal is not None and reads_certificates else None
        self.send_json(await site_scan.scan_https(self.services, request, workspace))


routes = [
    (r"/v1/site-scan/https", HttpsScanHandler),
]
