"""What the server itself refuses, before any handler: over-long bodies and headers, slow clients.

Spoken over a raw socket, since an HTTP client library would not send (or wait for) these.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from tornado.testing import bind_unused_port

from handlers import limits
from handlers.limits import LimitedHTTPServer
from tests.patience import PATIENCE_SECONDS

MIB = 1024 * 1024


class Connection:
    """One client connection, spoken to by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer(self, timeout: float = 3) -> tuple[int, dict, bytes]:
        raw = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), timeout)
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines if line)
        body = await asyncio.wait_for(self.reader.readexactly(int(headers.get("Content-Length", "0"))), timeout)
        return int(status_line.split(" ")[1]), headers, body

    async def closed(self) -> bool:
        """Whether the server closes the connection (within a short wait)."""
        try:
            return await asyncio.wait_for(self.reader.read(1), 0.5) == b""
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.writer.close()


@pytest.fixture
def connect(http_server, http_port):
    opened = []

    async def make() -> Connection:
        opened.append(await Connection.open(http_port))
        return opened[-1]

    yield make
    for connection in opened:
        connection.close()


SESSION = b"GET /v1/auth/session HTTP/1.1\r\nHost: localhost\r\n\r\n"


def post_head(path: str, length: int | None, extra: str = "") -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    return f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{size}{extra}\r\n".encode()


class TestBodies:
    @pytest.mark.gen_test
    async def test_a_body_announced_over_1_mib_is_refused_before_it_is_sent(self, connect):
        connection = await connect()
        await connection.send(post_head("/v1/domains", MIB + 1))
        status, headers, body = await connection.answer()
        assert status == 413
        assert json.loads(body) == {"status": 413, "code": "payload_too_large",
                                    "message": "The request body is over 1024 KiB."}
        assert headers["X-Request-Id"]

    @pytest.mark.gen_test
    async def test_the_refused_body_is_read_and_dropped_so_the_connection_serves_on(self, connect):
        connection = await connect()
        await connection.send(post_head("/v1/domains", 2 * MIB) + b" " * (2 * MIB))
        assert (await connection.answer())[0] == 413
        await connection.send(SESSION)
        assert (await connection.answer())[0] == 200

    @pytest.mark.gen_test
    async def test_a_client_waiting_for_100_continue_gets_the_refusal_and_a_closed_connection(self, connect):
        connection = await connect()
        await connection.send(post_head("/v1/domains", 2 * MIB, "Expect: 100-continue\r\n"))
        status, headers, _ = await connection.answer()
        assert (status, headers["Connection"]) == (413, "close")
        assert await connection.closed()

    @pytest.mark.gen_test
    async def test_an_absurd_announced_body_gets_the_refusal_and_a_closed_connection(self, connect):
        connection = await connect()
        await connection.send(post_head("/v1/domains", 10 * 1024**3))
        status, headers, body = await connection.answer()
        assert (status, json.loads(body)["code"], headers["Connection"]) == (413, "payload_too_large", "close")
        assert await connection.closed()

    @pytest.mark.gen_test
    async def test_a_body_of_exactly_1_mib_reaches_the_api(self, connect):
        connection = await connect()
        await connection.send(post_head("/v1/domains", MIB) + b" " * MIB)
        status, _, body = await connection.answer()
        assert (status, json.loads(body)["code"]) == (401, "unauthorized")

    @pytest.mark.gen_test
    async def test_a_chunked_body_over_1_mib_is_refused_in_the_envelope(self, connect):
        chunk = b" " * (256 * 1024)
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(5)) + b"0\r\n\r\n"
        connection = await connect()
        await connection.send(post_head("/v1/domains", None) + chunks)
        status, _, body = await connection.answer()
        assert (status, json.loads(body)["code"]) == (413, "payload_too_large")
        await connection.send(SESSION)
        assert (await connection.answer())[0] == 200

    @pytest.mark.gen_test
    async def test_a_portal_form_over_1_mib_is_refused_too(self, connect):
        connection = await connect()
        await connection.send(post_head("/signup", 2 * MIB))
        status, _, body = await connection.answer()
        assert (status, json.loads(body)["code"]) == (413, "payload_too_large")


class TestHeaders:
    @pytest.mark.gen_test
    async def test_headers_over_32_kib_are_431_and_the_connection_closed(self, connect):
        connection = await connect()
        await connection.send(f"GET /v1/auth/session HTTP/1.1\r\nHost: localhost\r\nX-Big: {'a' * 33_000}\r\n\r\n".encode())
        status, headers, body = await connection.answer()
        assert (status, json.loads(body)["code"], headers["Connection"]) == (431, "header_fields_too_large", "close")
        assert await connection.closed()

    @pytest.mark.gen_test
    async def test_a_long_query_string_counts_as_header_bytes(self, connect):
        connection = await connect()
        await connection.send(f"GET /v1/domains?q={'a' * 33_000} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        assert (await connection.answer())[0] == 431

    @pytest.mark.gen_test
    async def test_headers_under_the_limit_are_served(self, connect):
        connection = await connect()
        await connection.send(f"GET /v1/auth/session HTTP/1.1\r\nHost: localhost\r\nX-Big: {'a' * 30_000}\r\n\r\n".encode())
        assert (await connection.answer())[::2] == (200, b"null")

    @pytest.mark.gen_test
    async def test_a_head_beyond_what_is_read_ends_the_connection(self, connect):
        connection = await connect()
        await connection.send(f"GET /v1/auth/session HTTP/1.1\r\nHost: localhost\r\nX-Big: {'a' * 200_000}".encode())
        assert await connection.closed()


class TestMalformedRequests:
    """What Tornado's HTTP/1 parser refuses: 400 ``bad_request`` in the envelope, with a request id,
    and the connection closed (nothing after a framing error can be trusted), never a bare 400."""

    async def assert_refused_in_the_envelope(self, connect, request: bytes) -> None:
        connection = await connect()
        await connection.send(request)
        status, headers, body = await connection.answer()
        envelope = json.loads(body)
        assert (status, envelope["status"], envelope["code"]) == (400, 400, "bad_request"), request
        assert envelope["message"] and headers["Content-Type"].startswith("application/json")
        assert len(headers["X-Request-Id"]) == 32 and headers["Connection"] == "close"
        assert await connection.closed()

    @pytest.mark.gen_test
    async def test_a_content_length_that_is_not_a_number(self, connect):
        await self.assert_refused_in_the_envelope(connect, post_head("/v1/domains", None).replace(
            b"Transfer-Encoding: chunked", b"Content-Length: abc"))

    @pytest.mark.gen_test
    async def test_two_different_content_lengths(self, connect):
        await self.assert_refused_in_the_envelope(connect, post_head("/v1/domains", None).replace(
            b"Transfer-Encoding: chunked", b"Content-Length: 5, 6"))

    @pytest.mark.gen_test
    async def test_a_garbage_request_line(self, connect):
        await self.assert_refused_in_the_envelope(connect, b"HELLO THERE\r\nHost: localhost\r\n\r\n")

    @pytest.mark.gen_test
    async def test_both_content_length_and_transfer_encoding(self, connect):
        await self.assert_refused_in_the_envelope(connect, post_head("/v1/domains", 5, "Transfer-Encoding: chunked\r\n"))

    @pytest.mark.gen_test
    async def test_a_chunk_size_that_is_not_hexadecimal(self, connect):
        await self.assert_refused_in_the_envelope(connect, post_head("/v1/domains", None) + b"zz\r\n{}\r\n0\r\n\r\n")

    @pytest.mark.gen_test
    async def test_a_header_line_without_a_colon(self, connect):
        await self.assert_refused_in_the_envelope(connect, b"GET /v1/auth/session HTTP/1.1\r\nHost: localhost\r\nNoColon\r\n\r\n")

    @pytest.mark.gen_test
    async def test_a_host_header_that_is_not_a_host(self, connect):
        await self.assert_refused_in_the_envelope(connect, b"GET /v1/auth/session HTTP/1.1\r\nHost: a b\r\n\r\n")

    @pytest.mark.gen_test
    async def test_a_page_request_is_refused_the_same_way(self, connect):
        await self.assert_refused_in_the_envelope(connect, b"GET / HTTP/1.1\r\nHost: localhost\r\nNoColon\r\n\r\n")

    @pytest.mark.gen_test
    async def test_a_refused_header_value_reaches_neither_the_answer_nor_the_log(self, connect, caplog):
        secret = "ac_live_NotToBeSeenAnywhere0123456789abcd"
        connection = await connect()
        await connection.send(f"GET /v1/auth/session HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {secret}\x01\r\n\r\n".encode())
        status, _, body = await connection.answer()
        assert status == 400 and b"bad_request" in body
        assert b"NotToBeSeen" not in body
        assert "NotToBeSeen" not in caplog.text and "NotToBeSeen" not in repr([r.args for r in caplog.records])

    @pytest.mark.gen_test
    async def test_a_well_formed_request_on_a_kept_connection_is_still_served(self, connect):
        connection = await connect()
        for _ in range(2):
            await connection.send(SESSION)
            assert (await connection.answer())[::2] == (200, b"null")


@pytest.fixture
def quick_server(app, monkeypatch, io_loop):
    """A server of the service's class with timeouts short enough to wait for in a test."""
    monkeypatch.setattr(limits, "HEADER_TIMEOUT_SECONDS", 0.3)
    monkeypatch.setattr(limits, "BODY_TIMEOUT_SECONDS", 0.3)
    sock, port = bind_unused_port()
    server = LimitedHTTPServer(app)
    server.add_socket(sock)
    yield port
    server.stop()
    io_loop.run_sync(server.close_all_connections, timeout=PATIENCE_SECONDS)


class TestSlowClients:
    @pytest.mark.gen_test
    async def test_a_client_that_never_finishes_its_headers_is_disconnected(self, quick_server):
        connection = await Connection.open(quick_server)
        await connection.send(b"GET /v1/auth/session HTTP/1.1\r\nHost: loc")
        assert await asyncio.wait_for(connection.reader.read(), 2) == b""
        connection.close()

    @pytest.mark.gen_test
    async def test_a_client_that_never_finishes_its_body_is_disconnected(self, quick_server):
        connection = await Connection.open(quick_server)
        await connection.send(post_head("/v1/domains", 100) + b'{"apex": ')
        assert await asyncio.wait_for(connection.reader.read(), 2) == b""
        connection.close()

    @pytest.mark.gen_test
    async def test_an_idle_kept_alive_connection_is_closed(self, quick_server):
        connection = await Connection.open(quick_server)
        await connection.send(SESSION)
        assert (await connection.answer())[0] == 200
        assert await asyncio.wait_for(connection.reader.read(), 2) == b""
        connection.close()
