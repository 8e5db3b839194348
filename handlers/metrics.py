"""``GET /metrics``: the Prometheus text format, for the operator's scraper.

Off the ``/v1/`` rate limits and credentials. On the main port it needs ``[metrics] bearer_token``
(compared in constant time) and is a 404 while none is set; on ``[metrics] listen``, a separate
address the operator keeps private, it is open.
"""

from __future__ import annotations

import hmac
import json
from http.client import responses
from typing import Any

from core.metrics import CONTENT_TYPE
from handlers.base import BaseHandler


class MetricsHandler(BaseHandler):
    def initialize(self, services, open_access: bool = False) -> None:
        super().initialize(services)
        self.open_access = open_access

    async def get(self) -> None:
        if not self.open_access:
            token = self.services.config.metrics.bearer_token
            if not token:
                return self._refuse(404, "not_found", "Not found.")
            sent = self.request.headers.get("Authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
                self.set_header("WWW-Authenticate", 'Bearer realm="metrics"')
                return self._refuse(401, "unauthorized", "GET /metrics needs the bearer token of [metrics] bearer_token.")
        self.set_header("Content-Type", CONTENT_TYPE)
        self.set_header("Cache-Control", "no-store")
        self.finish(await self.services.metrics.scrape())

    def check_xsrf_cookie(self) -> None:
        """No XSRF check: only GET is served, and no cookie is read (a bearer token or none)."""

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Another method is a 405 naming the one there is; any error is in the envelope."""
        if status_code == 405:
            self.set_header("Allow", ", ".join(self.allowed_methods()))
        reason = responses.get(status_code, "Error")
        self._refuse(status_code, reason.lower().replace(" ", "_"), reason + ".")

    def _refuse(self, status: int, code: str, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps({"status": status, "code": code, "message": message}))


routes = [(r"/metrics", MetricsHandler)]
