"""A fake Cloudflare API on loopback that speaks the documented custom-hostnames envelope.

It answers ``GET /client/v4/zones/{zone}/dcv_delegation/uuid`` with the Cloudflare envelope,
and refuses a wrong bearer token with 401 and error code 10000, as the real API does.
"""

from __future__ import annotations

import tornado.web

from tests.servers._thread import ThreadedServer

ZONE_ID = "0f2a9c1d7b3e4a5f8c6d1e2b3a4f5c6d"
TOKEN = "test-cloudflare-token"


class _Base(tornado.web.RequestHandler):
    def initialize(self, api: FakeCloudflare) -> None:
        self.api = api

    def envelope(self, result: object, status: int = 200) -> None:
        self.set_status(status)
        self.write({"success": True, "errors": [], "messages": [], "result": result})

    def fail(self, status: int, code: int, message: str) -> None:
        self.set_status(status)
        self.write({"success": False, "errors": [{"code": code, "message": message}], "messages": [], "result": None})

    def prepare(self) -> None:
        self.api.requests.append((self.request.method, self.request.path))
        if self.request.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.fail(401, 10000, "Authentication error")
            self.finish()


class _DcvDelegation(_Base):
    def get(self, zone_id: str) -> None:
        if zone_id != ZONE_ID:
            self.fail(404, 1001, "Invalid zone identifier")
            return
        self.envelope({"uuid": self.api.delegation_uuid})


class FakeCloudflare:
    def __init__(self) -> None:
        self.delegation_uuid = "98f23a08960b326c"
        self.requests: list[tuple[str, str]] = []
        args = {"api": self}
        self._server = ThreadedServer(
            tornado.web.Application([(r"/client/v4/zones/([^/]+)/dcv_delegation/uuid", _DcvDelegation, args)])
        )
        self.api_base = self._server.url + "/client/v4"

    def start(self) -> FakeCloudflare:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()
