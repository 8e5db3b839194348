"""Server-rendered portal pages (Jinja2, autoescaped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from tornado import httputil
from tornado.web import HTTPError

from handlers.base import BaseHandler

TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent.parent / "templates"),
    autoescape=True,
)


class PageHandler(BaseHandler):
    def render_page(self, name: str, **context: Any) -> None:
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.finish(TEMPLATES.get_template(name).render(**context))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # Never a traceback on a page either; the request id ties a 500 to the log.
        self.render_page(
            "error.html",
            status=status_code,
            reason=httputil.responses.get(status_code, "Error"),
            request_id=self.request_id,
        )


class HomeHandler(PageHandler):
    async def get(self) -> None:
        self.render_page("home.html", base_url=self.services.config.server.base_url)


class PageNotFoundHandler(PageHandler):
    async def prepare(self) -> None:
        raise HTTPError(404)


routes = [(r"/", HomeHandler)]
