"""A real SMTP server on 127.0.0.1 (aiosmtpd), capturing every message it accepts.

It runs in a thread with its own event loop, like a real remote service. Tests configure the
service with ``[smtp] host = "127.0.0.1"``, ``port = server.port`` and ``starttls = false``.
``messages`` lists what was accepted, parsed (``email.message.EmailMessage``, with the envelope
in ``envelope_from`` / ``envelope_to`` attributes); ``refuse_recipients(code, text)`` makes it
refuse every recipient (``550 ...``) until ``reset()``, which also forgets the messages.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import socket
import threading
from email.message import EmailMessage

from aiosmtpd.smtp import SMTP, Envelope, Session


class _Handler:
    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    # aiosmtpd's hooks, by its names.
    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list
    ) -> str:
        refusal = self.server._refusal
        if refusal is not None:
            return refusal
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or envelope.content
        message = email.message_from_bytes(raw, policy=email.policy.default)
        message.envelope_from = envelope.mail_from  # type: ignore[attr-defined]
        message.envelope_to = list(envelope.rcpt_tos)  # type: ignore[attr-defined]
        with self.server._lock:
            self.server._messages.append(message)
        return "250 Message accepted"


class SmtpServer:
    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self.host = "127.0.0.1"
        self.port: int = self._sock.getsockname()[1]
        self._lock = threading.Lock()
        self._messages: list[EmailMessage] = []
        self._refusal: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            handler = _Handler(self)
            server = await self._loop.create_server(lambda: SMTP(handler, hostname="smtp.test"), sock=self._sock)
            self._started.set()
            await self._stop.wait()
            server.close()
            await server.wait_closed()

        asyncio.run(serve())

    def start(self) -> SmtpServer:
        self._thread.start()
        self._started.wait(5)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)

    @property
    def messages(self) -> list[EmailMessage]:
        with self._lock:
            return list(self._messages)

    def refuse_recipients(self, code: int = 550, text: str = "5.1.1 No such mailbox") -> None:
        self._refusal = f"{code} {text}"

    def reset(self) -> None:
        with self._lock:
            self._messages.clear()
        self._refusal = None
