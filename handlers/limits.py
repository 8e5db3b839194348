"""Limits on what a client may send, enforced before any handler runs.

Tornado answers an over-long body with a bare ``400`` and no body (or buffers it first, up to its
``max_body_size``), and closes the connection without a word when the headers are too long. A
client deserves the status that names the problem, in the API's error envelope: 413
``payload_too_large`` for a body over ``MAX_BODY_BYTES`` (the spec's 1 MiB) and 431
``header_fields_too_large`` for headers over ``MAX_HEADER_BYTES``. ``LimitedHTTPServer`` wraps each
request's delegate to answer those itself, without reading the body, then closes the connection
(the only way not to read the rest).

Slow clients are bounded too: ``HEADER_TIMEOUT_SECONDS`` for a request's headers (counted from the
end of the previous request, so it also ends idle keep-alive connections) and
``BODY_TIMEOUT_SECONDS`` for its body.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from tornado import httputil
from tornado.httpserver import HTTPServer

from core.errors import ApiError, HeaderFieldsTooLarge, PayloadTooLarge
from handlers.log import access_log, shown_path

#: The largest request body, per the spec; a bulk create of 500 hostnames is far below it.
MAX_BODY_BYTES = 1024 * 1024
#: The largest request head (request line and headers) answered with more than a 431.
MAX_HEADER_BYTES = 32 * 1024
#: What Tornado reads at most while looking for the end of the headers; a longer head has the
#: connection closed without an answer (reading it whole just to refuse it is what a flood wants).
HEADER_READ_CAP = 128 * 1024
HEADER_TIMEOUT_SECONDS = 20.0
BODY_TIMEOUT_SECONDS = 60.0
UNLIMITED = 2**62
#: How much of a refused body is read (and dropped) so that the answer reaches the client.
DISCARD_BYTES = 8 * 1024 * 1024


class LimitedHTTPServer(HTTPServer):
    """Tornado's server with the service's limits on headers, bodies and slow clients."""

    def initialize(self, *args: Any, **kwargs: Any) -> None:  # Tornado's constructor (a Configurable)
        kwargs.update(
            max_body_size=MAX_BODY_BYTES, max_header_size=HEADER_READ_CAP,
            idle_connection_timeout=HEADER_TIMEOUT_SECONDS, body_timeout=BODY_TIMEOUT_SECONDS,
        )
        super().initialize(*args, **kwargs)

    def start_request(self, server_conn: object, request_conn: httputil.HTTPConnection) -> httputil.HTTPMessageDelegate:
        return _Refuser(super().start_request(server_conn, request_conn), request_conn)


class _Refuser(httputil.HTTPMessageDelegate):
    """Passes a request on, unless its head or body is over the limit.

    A refusal is answered at once. A body the client is already sending (up to ``DISCARD_BYTES``
    more) is then read and dropped before the connection is reused: closing a socket with unread
    data makes the kernel send a reset, which would destroy the answer before most clients read
    it. A client that waits for ``100 Continue``, or announces an absurd body, has the connection
    closed right after the answer instead.
    """

    def __init__(self, delegate: httputil.HTTPMessageDelegate, connection: httputil.HTTPConnection) -> None:
        self.delegate = delegate
        self.connection = connection
        self.refused = False
        self.received = 0
        self.start_line: Any = None

    def headers_received(self, start_line: Any, headers: httputil.HTTPHeaders) -> Any:
        self.start_line = start_line
        head = len(start_line.path) + sum(len(name) + len(value) + 4 for name, value in headers.get_all())
        if head > MAX_HEADER_BYTES:
            self._answer(HeaderFieldsTooLarge(f"The request line and headers are over {MAX_HEADER_BYTES // 1024} KiB."),
                         close=True)
            self._finish()
            return None
        announced = _announced_length(headers)
        # Tornado's own limit would end in a bare 400: the size is judged here instead.
        self.connection.set_max_body_size(UNLIMITED)  # type: ignore[attr-defined]
        if announced > MAX_BODY_BYTES:
            close = headers.get("Expect", "").lower() == "100-continue" or announced > MAX_BODY_BYTES + DISCARD_BYTES
            self._answer(_too_large(), close=close)
            if close:
                self._finish()
            return None
        return self.delegate.headers_received(start_line, headers)

    def data_received(self, chunk: bytes) -> Any:
        self.received += len(chunk)
        if self.refused:
            if self.received > MAX_BODY_BYTES + DISCARD_BYTES:
                self._finish()  # enough read for nothing
            return None
        if self.received > MAX_BODY_BYTES:  # a chunked body, its size known only now
            self.delegate.on_connection_close()  # it drops what it had buffered
            self._answer(_too_large())
            return None
        return self.delegate.data_received(chunk)

    def finish(self) -> None:
        if self.refused:
            self._finish()  # the body was read whole: the connection may serve another request
        else:
            self.delegate.finish()

    def on_connection_close(self) -> None:
        if not self.refused:
            self.delegate.on_connection_close()

    def _answer(self, error: ApiError, *, close: bool = False) -> None:
        self.refused = True
        self.finished = False
        request_id = uuid.uuid4().hex
        body = json.dumps({"status": error.status, "code": error.code, "message": error.message},
                          separators=(",", ":")).encode()
        headers = httputil.HTTPHeaders({
            "Content-Type": "application/json; charset=UTF-8", "Content-Length": str(len(body)),
            "X-Request-Id": request_id, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
        })
        if close:
            headers["Connection"] = "close"
        self.connection.write_headers(
            httputil.ResponseStartLine("HTTP/1.1", error.status, httputil.responses[error.status]), headers, body
        )
        path = self.start_line.path.split("?", 1)[0][:200]  # never the query, as in the access log
        access_log.warning("%d %s %s (-@-) rid=%s", error.status, self.start_line.method, shown_path(path), request_id)

    def _finish(self) -> None:
        """Ends the answer; before the body is read whole, Tornado then closes the connection."""
        if not self.finished:
            self.finished = True
            self.connection.finish()


def _too_large() -> PayloadTooLarge:
    return PayloadTooLarge(f"The request body is over {MAX_BODY_BYTES // 1024} KiB.")


def _announced_length(headers: httputil.HTTPHeaders) -> int:
    """The Content-Length, or 0 (a malformed one is Tornado's to refuse)."""
    try:
        return int(headers.get("Content-Length", "0").split(",")[0].strip())
    except ValueError:
        return 0

