"""Cloudflare for SaaS custom hostnames.

The API and its token are operator configuration, so requests go straight out (no outbound
address guard), with timeouts. Every answer is read through ``_call``: Cloudflare can answer
``success: false`` with any status code, so both are checked.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from core.config import CloudflareConfig
from core.errors import UpstreamError

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 15
DCV_ZONE = "dcv.cloudflare.com"
_DELEGATION_ID = re.compile(r"^[0-9a-z]{8,64}$")


class CloudflareProvider:
    name = "edge_provider_for_saas"

    def __init__(self, config: CloudflareConfig) -> None:
        self.config = config
        self._delegation_id: str | None = None

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        url = f"{self.config.api_base.rstrip('/')}/zones/{self.config.zone_id}{path}"
        request = HTTPRequest(
            url,
            method=method,
            headers={"Authorization": f"Bearer {self.config.api_token}", "Content-Type": "application/json"},
            body=None if body is None else json.dumps(body),
            connect_timeout=TIMEOUT_SECONDS,
            request_timeout=TIMEOUT_SECONDS,
        )
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
        except (HTTPClientError, OSError) as exc:
            log.warning("cloudflare %s %s failed: %s", method, path, exc)
            raise UpstreamError("The edge provider did not answer; try again shortly.") from None
        try:
            data = json.loads(response.body or b"null")
        except ValueError:
            data = None
        if response.code >= 400 or not isinstance(data, dict) or data.get("success") is False:
            errors = data.get("errors") if isinstance(data, dict) else None
            log.warning("cloudflare %s %s answered %s: %s", method, path, response.code, errors)
            raise UpstreamError(f"The edge provider refused the request (HTTP {response.code}).")
        return data.get("result")

    async def delegation_target(self, apex: str) -> str:
        if self._delegation_id is None:
            result = await self._call("GET", "/dcv_delegation/uuid")
            value = result.get("uuid") if isinstance(result, dict) else None
            if not isinstance(value, str) or not _DELEGATION_ID.match(value):
                raise UpstreamError("The edge provider sent no usable DCV delegation id.")
            self._delegation_id = value
        return f"{apex}.{self._delegation_id}.{DCV_ZONE}"
