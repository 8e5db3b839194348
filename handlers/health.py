"""``GET /healthz`` and ``GET /readyz`` for load balancers and orchestrators.

Both are outside the rate limits and credentials, and a passing check writes no access-log line
(a balancer asks every few seconds; a failing one is logged). ``/healthz``: the process answers.
``/readyz``: the database answers and its schema is the one this code writes; 503 in the error
envelope otherwise, so a balancer keeps traffic away from a process that cannot serve it.
"""

from __future__ import annotations

import json
import sqlite3
from http.client import responses
from typing import Any

from handlers.base import BaseHandler
from store import unavailable_reason
from store.migrations import latest_version, schema_version


class _ProbeHandler(BaseHandler):
    def check_xsrf_cookie(self) -> None:
        """No XSRF check: only GET is served, and no cookie is read."""

    def answer(self, status: int, body: dict[str, Any]) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(body))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Another method is a 405 naming the one there is; any error is in the envelope."""
        if status_code == 405:
            self.set_header("Allow", "GET")
        reason = responses.get(status_code, "Error")
        self.answer(status_code, {"status": status_code, "code": reason.lower().replace(" ", "_"), "message": reason + "."})


class HealthHandler(_ProbeHandler):
    def get(self) -> None:
        self.answer(200, {"status": "ok"})


class ReadyHandler(_ProbeHandler):
    async def get(self) -> None:
        store = self.services.store
        try:
            version = await store.run(schema_version, store)
        except Exception as exc:
            if not isinstance(exc, sqlite3.Error) and unavailable_reason(exc) is None:
                raise
            why = unavailable_reason(exc) or exc  # PostgreSQL's own text may name hosts: not for anyone asking
            return self.answer(503, {"status": 503, "code": "not_ready", "message": f"The database does not answer: {why}."})
        expected = latest_version()
        if version != expected:
            return self.answer(503, {"status": 503, "code": "not_ready",
                                     "message": f"The database's schema is version {version}; this code needs {expected}."})
        self.answer(200, {"status": "ready", "schemaVersion": version})


routes = [(r"/healthz", HealthHandler), (r"/readyz", ReadyHandler)]
