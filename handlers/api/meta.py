"""``/v1/openapi.json``: the API description kept in the repository."""

from __future__ import annotations

from pathlib import Path

from handlers.base import ApiHandler

OPENAPI_PATH = Path(__file__).resolve().parents[2] / "static" / "openapi.json"


class OpenApiHandler(ApiHandler):
    async def get(self) -> None:
        self.finish(OPENAPI_PATH.read_bytes())


routes = [(r"/v1/openapi.json", OpenApiHandler)]
