"""Limits on what a client may send, enforced before any handler runs.

Tornado answers an over-long body with a bare ``400`` and no body (or buffers it first, up to its
``max_body_size``), and closes the connection without a word when the headers are too long. A
client deserves the status that names the problem, in the API's error envelope: 413
``payload_too_large`` for a body over ``MAX_BODY_BYTES`` (the spec's 1 MiB) and 431
``header_fields_too_large`` for headers over ``MAX_HEADER_BYTES``. ``LimitedHTTPServer`` wraps each
request's delegate to answer those itself, without reading the body, then closes the connection
(the only way not to read the rest).

A request Tornado's HTTP/1 parser refuses (a garbage request line, a header line without a colon,
a bad or doubled Content-Length, Content-Length with Transfer-Encoding, a bad chunk size, a bad
Host header) would get a bare ``400`` with no body and no request id; it gets 400 ``bad_request``
in the envelope, with ``X-Request-Id`` and ``Connection: close``, instead (``_EnvelopeConnection``).

Slow clients are bounded too: ``HEADER_TIMEOUT_SECONDS`` for a request's headers (counted from the
end of the previous request, so it also ends idle keep-alive connections) and
``BODY_TIMEOUT_SECONDS`` for its body.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import uuid
from collections.abc import Awaitable
from http.client import responses
from typing import Any, cast

from tornado import httputil, iostream
from tornado.http1connection import HTTP1Connection, HTTP1ServerConnection, _QuietException
from tornado.httpserver import HTTPServer, _HTTPRequestContext
from tornado.log import gen_log

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

    def handle_stream(self, stream: iostream.IOStream, address: tuple[Any, ...]) -> None:
        """Tornado's, but the connection is served by ``_EnvelopeServerConnection``."""
        context = _HTTPRequestContext(stream, address, self.protocol, self.trusted_downstream)
        conn = _EnvelopeServerConnection(stream, self.conn_params, context)
        self._connections.add(conn)
        conn.start_serving(self)

    def start_request(self, server_conn: object, request_conn: httputil.HTTPConnection) -> httputil.HTTPMessageDelegate:
        # Every request's connection is an _EnvelopeConnection (_EnvelopeServerConnection makes them).
        return _Refuser(super().start_request(server_conn, request_conn), cast(_EnvelopeConnection, request_conn))


class _EnvelopeServerConnection(HTTP1ServerConnection):
    """Tornado's loop over a socket's requests (the same from 6.4 to 6.6), but each request is read by
    an ``_EnvelopeConnection``, and a request it could not parse is answered here.

    Tornado's loop names the class of the connection it makes. Making it one of ours afterwards (by
    setting ``__class__``) moves the object's attributes into a dict, and CPython 3.11 then reads
    each of them about three times slower, on every use while the request is read and answered.
    Catching ``_Malformed`` here, not in a coroutine wrapped around Tornado's, spares another layer
    that every request went through."""

    async def _server_request_loop(self, delegate: httputil.HTTPServerConnectionDelegate) -> None:
        try:
            while True:
                conn = _EnvelopeConnection(self.stream, False, self.params, self.context)
                request_delegate = delegate.start_request(self, conn)
                try:
                    ret = await conn.read_response(request_delegate)
                except _Malformed as exc:
                    await conn.answer_malformed(str(exc))
                    return
                except (iostream.StreamClosedError, iostream.UnsatisfiableReadError, asyncio.CancelledError):
                    return
                except _QuietException:  # Tornado before 6.6: a delegate's error, already logged
                    conn.close()
                    return
                except Exception:  # noqa: BLE001 - as Tornado's loop: logged, the connection closed
                    gen_log.error("Uncaught exception", exc_info=True)
                    conn.close()
                    return
                if not ret:
                    return
                await asyncio.sleep(0)
        finally:
            delegate.on_close(self)


#: Tornado's parse of a request line, kept for the lines seen lately: a client polling one path
#: sends the same line each time. A refused line raises, and is not kept.
_request_line = functools.lru_cache(maxsize=1024)(httputil.parse_request_start_line)


class _Malformed(Exception):
    """What Tornado's parser refused (an ``HTTPInputError``), carried past its bare 400."""


def _reason(exc: httputil.HTTPInputError) -> str:
    """What the parser refused, without the refused value: Tornado quotes it (``Invalid header
    value 'Bearer ac_live_…'``), and a header value may be a credential, which must reach neither
    the log nor an answer that a proxy might keep."""
    return re.split(r"[:'\"]", str(exc), maxsplit=1)[0].strip()[:200] or "malformed request"


class _EnvelopeConnection(HTTP1Connection):
    """Tornado's HTTP/1 connection, but a request it cannot parse gets 400 ``bad_request`` in the
    envelope. Its own answer is written inside the method that reads the message, so the parser's
    errors are raised as ``_Malformed`` instead, which that method does not catch, and answered by
    ``_EnvelopeServerConnection``."""

    head_bytes = 0
    "The size of the request line and headers as sent, judged by ``_Refuser``."

    def _parse_headers(self, data: bytes) -> tuple[str, httputil.HTTPHeaders]:
        self.head_bytes = len(data)
        try:
            start_line, headers = super()._parse_headers(data)
            _request_line(start_line)  # Tornado parses it next, outside any hook
        except httputil.HTTPInputError as exc:
            raise _Malformed(_reason(exc)) from None
        return start_line, headers

    def _read_body(self, code: int, headers: httputil.HTTPHeaders, delegate: httputil.HTTPMessageDelegate) -> Awaitable[None] | None:
        try:
            body = super()._read_body(code, headers, delegate)  # the length headers are judged here
        except httputil.HTTPInputError as exc:
            raise _Malformed(_reason(exc)) from None
        return None if body is None else self._malformed_body(body)

    async def _malformed_body(self, body: Awaitable[None]) -> None:
        try:
            await body  # chunk sizes and framing are judged while it is read
        except httputil.HTTPInputError as exc:
            raise _Malformed(_reason(exc)) from None

    async def answer_malformed(self, reason: str) -> None:
        """400 in the envelope, then the connection closed: after a framing error nothing that
        follows on it can be trusted. Nothing is written if an answer was already started."""
        if self._response_start_line is None and self.stream is not None and not self.stream.closed():
            request_id = uuid.uuid4().hex
            message = f"The request is not valid HTTP/1.1 ({reason})."
            body = json.dumps({"status": 400, "code": "bad_request", "message": message}, separators=(",", ":")).encode()
            head = (
                "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=UTF-8\r\n"
                f"Content-Length: {len(body)}\r\nX-Request-Id: {request_id}\r\nX-Content-Type-Options: nosniff\r\n"
                "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
            )
            start = self._request_start_line
            method, path = (start.method, shown_path(start.path.split("?", 1)[0][:200])) if start else ("-", "-")
            access_log.warning("400 %s %s (-@-) rid=%s: %s", method, path, request_id, reason)
            try:
                await self.stream.write(head.encode() + body)
            except iostream.StreamClosedError:
                pass  # the client left; nothing to tell it
        self.close()


#: The media types Tornado parses into form arguments on its own.
_FORMS = ("multipart/form-data", "application/x-www-form-urlencoded")


class _Refuser(httputil.HTTPMessageDelegate):
    """Passes a request on, unless its head or body is over the limit.

    A refusal is answered at once. A body the client is already sending (up to ``DISCARD_BYTES``
    more) is then read and dropped before the connection is reused: closing a socket with unread
    data makes the kernel send a reset, which would destroy the answer before most clients read
    it. A client that waits for ``100 Continue``, or announces an absurd body, has the connection
    closed right after the answer instead.
    """

    def __init__(self, delegate: httputil.HTTPMessageDelegate, connection: _EnvelopeConnection) -> None:
        self.delegate = delegate
        self.connection = connection
        self.refused = False
        self.received = 0
        self.start_line: Any = None

    def headers_received(self, start_line: Any, headers: httputil.HTTPHeaders) -> Any:
        self.start_line = start_line
        if self.connection.head_bytes > MAX_HEADER_BYTES:
            self._answer(HeaderFieldsTooLarge(f"The request line and headers are over {MAX_HEADER_BYTES // 1024} KiB."),
                         close=True)
            self._finish()
            return None
        announced = _announced_length(headers)
        # Tornado's own limit would end in a bare 400: the size is judged here instead.
        self.connection.set_max_body_size(UNLIMITED)
        if announced > MAX_BODY_BYTES:
            close = headers.get("Expect", "").lower() == "100-continue" or announced > MAX_BODY_BYTES + DISCARD_BYTES
            self._answer(_too_large(), close=close)
            if close:
                self._finish()
            return None
        if start_line.path.startswith("/v1/") and "Content-Type" in headers and headers["Content-Type"].lower().startswith(_FORMS):
            # The JSON API reads every body as JSON, whatever its Content-Type says. Tornado would
            # parse a form before any handler runs and refuse a malformed one with a bare 400,
            # ahead of the rate limits and authentication: it is not shown the form type.
            del headers["Content-Type"]
        try:
            return self.delegate.headers_received(start_line, headers)
        except httputil.HTTPInputError as exc:  # the request itself refused (its Host, its query)
            self._answer(ApiError(f"The request is not valid HTTP/1.1 ({_reason(exc)})."), close=True)
            self._finish()
            return None

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
            httputil.ResponseStartLine("HTTP/1.1", error.status, responses[error.status]), headers, body
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
    if "Content-Length" not in headers:  # not headers.get(): it raises and catches a KeyError
        return 0
    try:
        return int(headers["Content-Length"].split(",")[0].strip())
    except ValueError:
        return 0

