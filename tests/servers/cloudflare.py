"""A fake Cloudflare API on loopback that speaks the documented custom-hostnames API.

Under ``/client/v4/zones/{zone}``: ``dcv_delegation/uuid``; ``custom_hostnames`` (POST 201, 409 and
code 1406 for a duplicate, 400 and 1407/1408/1409 for a bad name; GET lists, ``?hostname=`` is an
exact match); ``custom_hostnames/{id}`` (GET 200, PATCH 202, DELETE 200 with a bare ``{"id"}``; 404
and 1436 for an unknown id). A wrong token is 401 and code 10000, a wrong zone 404. Every answer
carries ``Ratelimit`` and ``Ratelimit-Policy`` for a per-token quota; over it, 429 with
``Retry-After`` and code 971.

The server runs in its own thread; tests steer it through the methods of ``FakeCloudflare``, which
take its lock. New hostnames are ``pending`` / ``pending_validation`` unless ``auto_activate``, or
as ``created_as`` says (``set_state``'s arguments, applied to each new hostname). ``latency``
slows every answer; ``hold`` keeps them all back until ``release``, for a race a test must win.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import tornado.web

from tests.patience import PATIENCE_SECONDS
from tests.servers._thread import ThreadedServer

ZONE_ID = "0f2a9c1d7b3e4a5f8c6d1e2b3a4f5c6d"
TOKEN = "test-cloudflare-token"
RESERVED_TLDS = {"test", "example", "invalid", "localhost"}
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def _stamp(days: int = 0, fraction: bool = False) -> str:
    """Now (plus ``days``) as Cloudflare writes it: RFC 3339 in UTC, ``created_at`` with microseconds."""
    when = dt.datetime.now(dt.UTC) + dt.timedelta(days=days)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if fraction else "%Y-%m-%dT%H:%M:%SZ")


def hostname_problem(name: Any) -> tuple[int, str] | None:
    """Cloudflare's code and message for a hostname it would refuse, else ``None``."""
    if not isinstance(name, str) or not name or len(name) > 255:
        return 1407, "Invalid custom hostname."
    if not name.isascii():
        return 1408, "Custom hostname must be ASCII."
    try:
        ipaddress.ip_address(name)
        return 1407, "Invalid custom hostname."
    except ValueError:
        pass
    labels = name.lower().split(".")
    if len(labels) < 2 or not all(_LABEL.match(label) for label in labels):
        return 1407, "Invalid custom hostname."
    if labels[-1] in RESERVED_TLDS:
        return 1409, "Custom hostname uses a reserved top-level domain."
    return None


class _Base(tornado.web.RequestHandler):
    def initialize(self, api: FakeCloudflare) -> None:
        self.api = api

    def envelope(self, result: object, status: int = 200, **extra: object) -> None:
        self.set_status(status)
        self.write({"success": True, "errors": [], "messages": [], "result": result, **extra})

    def fail(self, status: int, code: int, message: str) -> None:
        self.set_status(status)
        self.write({"success": False, "errors": [{"code": code, "message": message}], "messages": [], "result": None})

    def body(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.request.body or b"{}")
        except ValueError:
            data = None
        with self.api.lock:
            self.api.bodies.append((self.request.method, self.request.path, data))
        if not isinstance(data, dict):
            self.fail(400, 1400, "Unable to decode the JSON request body.")
            return None
        return data

    async def prepare(self) -> None:
        api = self.api
        with api.lock:
            api.requests.append((self.request.method, self.request.path))
            latency = api.latency
        if latency:
            await asyncio.sleep(latency)
        if not api._released.is_set():
            with api.lock:
                api.held += 1
            while not api._released.is_set():
                await asyncio.sleep(0.005)
        token = self.request.headers.get("Authorization", "")
        with api.lock:
            remaining, reset = api._count(token)
            failure = api._failures.pop(0) if api._failures and token == f"Bearer {TOKEN}" else None
        self.set_header("Ratelimit", f'"default";r={max(0, remaining)};t={reset}')
        self.set_header("Ratelimit-Policy", f'"default";q={api.quota};w={math.ceil(api.window)}')
        if token != f"Bearer {TOKEN}":
            self.fail(401, 10000, "Authentication error")
        elif remaining < 0 or (failure and failure[0] == 429):
            retry_after = reset if remaining < 0 else failure[1]
            if retry_after is not None:
                self.set_header("Retry-After", str(math.ceil(retry_after)))
            self.fail(429, 971, "Please wait and consider throttling your request speed")
        elif failure is not None:
            if failure[1] is not None:
                self.set_header("Retry-After", str(math.ceil(failure[1])))
            self.fail(failure[0], 1500, "Internal error")
        elif self.path_args and self.path_args[0] != ZONE_ID:
            self.fail(404, 7003, f"Could not route to /zones/{self.path_args[0]}, perhaps your object identifier is invalid?")
        else:
            return
        self.finish()

    def finish(self, chunk: Any = None) -> Any:
        with self.api.lock:  # before the answer leaves, so a test that has it sees the status
            self.api.statuses.append(self.get_status())
        return super().finish(chunk)


class _DcvDelegation(_Base):
    def get(self, zone_id: str) -> None:
        self.envelope({"uuid": self.api.delegation_uuid})


class _Hostnames(_Base):
    def get(self, zone_id: str) -> None:
        wanted = self.get_query_argument("hostname", None)
        page = int(self.get_query_argument("page", "1"))
        per_page = int(self.get_query_argument("per_page", "20"))
        with self.api.lock:
            found = [r for r in self.api.hostnames.values() if wanted is None or r["hostname"] == wanted]
            items = json.loads(json.dumps(found[(page - 1) * per_page : page * per_page]))
        info = {"page": page, "per_page": per_page, "count": len(items), "total_count": len(found),
                "total_pages": max(1, math.ceil(len(found) / per_page))}
        self.envelope(items, result_info=info)

    def post(self, zone_id: str) -> None:
        if (data := self.body()) is None:
            return
        hostname, ssl = data.get("hostname"), data.get("ssl", {"method": "http", "type": "dv"})
        if problem := hostname_problem(hostname):
            return self.fail(400, *problem)
        if not isinstance(ssl, dict) or "method" not in ssl or "type" not in ssl:
            return self.fail(400, 1440, "SSL requires both type and method.")
        with self.api.lock:
            self.api.issue_requests.append((hostname.lower(), time.monotonic()))
            if self.api.find(hostname) is not None:
                return self.fail(409, 1406, "Duplicate custom hostname found.")
            if self.api.max_hostnames is not None and len(self.api.hostnames) >= self.api.max_hostnames:
                return self.fail(403, 1405, "Quota exceeded for custom hostnames.")
            record = self.api._new_record(hostname.lower(), ssl)
            answer = json.loads(json.dumps(record))
        if not self.api.records_on_create:
            answer["ssl"].pop("validation_records", None)
            answer["ssl"].pop("dcv_delegation_records", None)
        self.envelope(answer, 201)


class _Hostname(_Base):
    def _record(self, hostname_id: str) -> dict[str, Any] | None:
        record = self.api.hostnames.get(hostname_id)
        if record is None:
            self.fail(404, 1436, "The custom hostname was not found.")
        return record

    def get(self, zone_id: str, hostname_id: str) -> None:
        with self.api.lock:
            if (record := self._record(hostname_id)) is not None:
                self.envelope(record)

    def patch(self, zone_id: str, hostname_id: str) -> None:
        if (data := self.body()) is None:
            return
        ssl = data.get("ssl")
        if ssl is not None and (not isinstance(ssl, dict) or "method" not in ssl or "type" not in ssl):
            return self.fail(400, 1440, "SSL requires both type and method.")
        with self.api.lock:
            if (record := self._record(hostname_id)) is None:
                return
            if ssl is not None and ssl["method"] == record["ssl"]["method"]:
                timed_out = record["ssl"]["status"].endswith("_timed_out")
                if timed_out or record["status"] == "moved":
                    self.api.revalidations += 1
                if timed_out:
                    record["ssl"]["status"] = "pending_validation"
                if record["status"] == "moved":
                    record["status"] = "pending"
            elif ssl is not None:
                record["ssl"].update(method=ssl["method"], status="pending_validation")
            self.envelope(record, 202)

    def delete(self, zone_id: str, hostname_id: str) -> None:
        with self.api.lock:
            if self._record(hostname_id) is not None:
                del self.api.hostnames[hostname_id]
                self.write({"id": hostname_id})


class FakeCloudflare:
    """The fake API and its controls; all state is plain dicts behind ``lock``."""

    def __init__(self, *, quota: int = 1200, window: float = 300.0) -> None:
        self.lock = threading.RLock()
        self.delegation_uuid = "98f23a08960b326c"
        self.default_quota, self.default_window = quota, window
        self._fresh()
        args = {"api": self}
        zone = r"/client/v4/zones/([^/]+)"
        self._server = ThreadedServer(
            tornado.web.Application([
                (zone + r"/dcv_delegation/uuid", _DcvDelegation, args),
                (zone + r"/custom_hostnames", _Hostnames, args),
                (zone + r"/custom_hostnames/([^/]+)", _Hostname, args),
            ])
        )
        self.api_base = self._server.url + "/client/v4"

    def start(self) -> FakeCloudflare:
        self._server.start()
        return self

    def drop_idle_connections(self) -> None:
        self._server.close_connections()

    @property
    def connections(self) -> int:
        """Connections accepted so far: a client that keeps them opens one for many calls."""
        return self._server.connections

    def stop(self) -> None:
        self._server.stop()

    def reset(self) -> None:
        """Forget hostnames, logs, counters, failures and settings: a fresh account.

        A request a finished test left in flight (one its client gave up on while the fake slept
        out its latency) is answered first: otherwise it would land in the fresh account.
        """
        self.release()
        self.wait_until_answered()
        self._fresh()

    def _fresh(self) -> None:
        with self.lock:
            self.hostnames: dict[str, dict[str, Any]] = {}
            self.requests: list[tuple[str, str]] = []
            self.bodies: list[tuple[str, str, Any]] = []
            self.issue_requests: list[tuple[str, float]] = []
            "Valid-looking POSTs of a hostname, with when they arrived (time.monotonic)."
            self.statuses: list[int] = []
            self.revalidations = 0
            self.auto_activate = False
            self.created_as: dict[str, Any] = {}
            self.records_on_create = True
            self.latency = 0.0
            self._released = threading.Event()
            self._released.set()
            self.held = 0
            "Requests that found the fake held (``hold``) so far."
            self.max_hostnames: int | None = None  # the zone's custom hostname quota (403, 1405)
            self.quota, self.window = self.default_quota, self.default_window
            self._failures: list[tuple[int, float | None]] = []
            self._windows: dict[str, tuple[float, int]] = {}

    def hold(self) -> None:
        """Answer nothing until ``release``: a provider slow for exactly as long as a test needs."""
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    async def wait_until_held(self, n: int = 1, bound_seconds: float = PATIENCE_SECONDS) -> None:
        """Wait (on the caller's loop) until ``n`` requests are being held."""
        deadline = time.monotonic() + bound_seconds
        while self.held < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"the fake Cloudflare held {self.held} of {n} request(s) after {bound_seconds} s")
            await asyncio.sleep(0.005)

    def wait_until_answered(self, bound_seconds: float = PATIENCE_SECONDS) -> None:
        """Block until every request taken so far has been answered (each adds one status)."""
        deadline = time.monotonic() + bound_seconds
        while True:
            with self.lock:
                pending = len(self.requests) - len(self.statuses)
            if pending <= 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the fake Cloudflare still owes {pending} answer(s) after {bound_seconds} s")
            time.sleep(0.01)

    def fail_next(self, n: int = 1, *, status: int = 500, retry_after: float | None = None) -> None:
        """Answer the next ``n`` authenticated requests with ``status`` (and ``Retry-After``)."""
        with self.lock:
            self._failures.extend([(status, retry_after)] * n)

    def find(self, hostname: str) -> dict[str, Any] | None:
        with self.lock:
            return next((r for r in self.hostnames.values() if r["hostname"] == hostname.lower()), None)

    def set_state(
        self,
        hostname: str,
        *,
        status: str | None = None,
        ssl_status: str | None = None,
        verification_errors: list[str] | None = None,
        ssl_errors: list[str] | None = None,
    ) -> dict[str, Any]:
        """Move a hostname; ``ssl_status="active"`` issues its certificate as Cloudflare shows it."""
        with self.lock:
            record = self.find(hostname)
            assert record is not None, f"the fake has no hostname {hostname}"
            return self._set(record, status=status, ssl_status=ssl_status, verification_errors=verification_errors,
                             ssl_errors=ssl_errors)

    def _set(
        self,
        record: dict[str, Any],
        *,
        status: str | None = None,
        ssl_status: str | None = None,
        verification_errors: list[str] | None = None,
        ssl_errors: list[str] | None = None,
    ) -> dict[str, Any]:
        """Change ``record`` (the caller holds the lock)."""
        if status is not None:
            record["status"] = status
        if ssl_status == "active":
            self._issue(record)
        elif ssl_status is not None:
            record["ssl"]["status"] = ssl_status
        if verification_errors is not None:
            record["verification_errors"] = list(verification_errors)
        if ssl_errors is not None:
            record["ssl"]["validation_errors"] = [{"message": m} for m in ssl_errors]
        return record

    def edit(self, hostname: str, change: Callable[[dict[str, Any]], object]) -> None:
        """Change a hostname's raw record under the lock, for shapes ``set_state`` does not make."""
        with self.lock:
            record = self.find(hostname)
            assert record is not None, f"the fake has no hostname {hostname}"
            change(record)

    def _count(self, token: str) -> tuple[int, int]:
        """Count one request against the token's window: (remaining, seconds until reset)."""
        now = time.monotonic()
        start, used = self._windows.get(token, (now, 0))
        if now >= start + self.window:
            start, used = now, 0
        self._windows[token] = (start, used + 1)
        return self.quota - used - 1, max(1, math.ceil(start + self.window - now))

    def _new_record(self, hostname: str, ssl: dict[str, Any]) -> dict[str, Any]:
        record_id = str(uuid.uuid4())
        token = str(uuid.uuid4())
        record = {
            "id": record_id,
            "hostname": hostname,
            "status": "pending",
            "verification_errors": ["custom hostname does not CNAME to this zone."],
            "ownership_verification": {"type": "txt", "name": f"_cf-custom-hostname.{hostname}", "value": token},
            "ownership_verification_http": {
                "http_url": f"http://{hostname}/.well-known/cf-custom-hostname-challenge/{record_id}",
                "http_body": token,
            },
            "ssl": {
                "id": str(uuid.uuid4()), "type": ssl.get("type"), "method": ssl.get("method"),
                "status": "pending_validation",
                "certificate_authority": ssl.get("certificate_authority") or "google",
                "bundle_method": "ubiquitous", "wildcard": False, "settings": {},
                "validation_records": [{"status": "pending", "txt_name": f"_acme-challenge.{hostname}",
                                        "txt_value": uuid.uuid4().hex}],
                "dcv_delegation_records": [{"cname": f"_acme-challenge.{hostname}",
                                            "cname_target": f"{hostname}.{self.delegation_uuid}.dcv.cloudflare.com"}],
                "validation_errors": [],
            },
            "created_at": _stamp(fraction=True),
        }
        if self.auto_activate:
            record.update(status="active", verification_errors=[])
            self._issue(record)
        self._set(record, **self.created_as)
        self.hostnames[record_id] = record
        return record

    @staticmethod
    def _issue(record: dict[str, Any]) -> None:
        expires = _stamp(90)
        ssl = record["ssl"]
        ssl.update(status="active", issuer="LetsEncrypt", expires_on=expires, validation_errors=[])
        ssl.pop("validation_records", None)
        ssl["certificates"] = [{
            "id": str(uuid.uuid4()), "issuer": "LetsEncrypt", "serial_number": uuid.uuid4().hex,
            "signature": "ECDSAWithSHA256", "issued_on": _stamp(), "expires_on": expires,
            "fingerprint_sha256": uuid.uuid4().hex * 2,
        }]
