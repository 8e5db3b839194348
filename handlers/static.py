"""``/static/`` (the portal's CSS and script, the OpenAPI document), served by Tornado's static
file handler with the headers and request id every other response carries."""

from __future__ import annotations

import os
from typing import Any

from tornado.web import StaticFileHandler

from core import logs
from handlers.base import REQUEST_ID_HEADER


class StaticHandler(StaticFileHandler):
    """``/static/``: the same safe headers and request id as every other response."""

    def initialize(self, *args: Any, **kwargs: Any) -> None:
        super().initialize(*args, **kwargs)
        self.request_id = os.urandom(16).hex()  # 128 random bits, as a uuid4 without its cost
        logs.request_id.set(self.request_id)  # or its log line would carry the previous request's
        logs.workspace.set(None)
        self.set_header(REQUEST_ID_HEADER, self.request_id)

    def set_default_headers(self) -> None:
        self.set_header("X-Content-Type-Options", "nosniff")
        self.clear_header("Server")
        if getattr(self, "request_id", None):
            self.set_header(REQUEST_ID_HEADER, self.request_id)
