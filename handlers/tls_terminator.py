"""The TLS terminator's endpoints, on ``[tls_terminator] listen`` only (never on the main port):
what Caddy asks at handshake time (docs/acme.md, "Certificates to the TLS terminator").

- ``GET /caddy/certificate?server_name=<host>``: Caddy's ``get_certificate http``. 200 with the
  chain and the private key (PEM), or 404 for a name with no certificate: never 204, which tells
  Caddy to go on and obtain a certificate itself.
- ``GET /caddy/ask?domain=<host>``: Caddy's on-demand ``ask``. Caddy 2.6 asks it when
  ``get_certificate`` gave no certificate, before obtaining one from its own issuer; newer Caddy
  also before asking ``get_certificate``. 200 only for a hostname that has a certificate here, so
  Caddy serves ours and never issues one of its own: not for a domain that is merely registered
  (anyone can add one), nor for a verified one whose certificate is still being issued (two
  issuers for one name, and Caddy's copy would shadow ours from its cache until it expires).

Both take the endpoints' own secret, as ``?secret=`` (``get_certificate http`` and ``ask`` send a
URL and no header) or ``Authorization: Bearer``; without it, 403 and an empty body. Query values are
read as sent, not through ``get_argument``, which strips white space and turns control characters
into spaces: ``%20<secret>`` would be the secret, ``<host>%00`` the host. Only GET is served (HEAD
and the rest are 405). The access log writes the path, never the query string.
"""

from __future__ import annotations

import logging
from typing import Any

import tornado.web

from core.tls_terminator.index import CertificateIndex, Served
from core.tls_terminator.secret import secret_matches
from handlers.log import access_log, shown_path

log = logging.getLogger(__name__)


class _TerminatorHandler(tornado.web.RequestHandler):
    SUPPORTED_METHODS = ("GET",)

    def initialize(self, index: CertificateIndex, secret: str) -> None:
        self.index = index
        self.secret = secret

    def set_default_headers(self) -> None:
        self.clear_header("Server")
        self.clear_header("Content-Type")
        self.set_header("Cache-Control", "no-store")  # private keys: no cache anywhere keeps one

    def prepare(self) -> None:
        sent = self.request.headers.get("Authorization", "")
        # Tornado decoded the header as Latin-1: encoded back, the bytes that came.
        given = sent[7:].encode("latin-1") if sent[:7].lower() == "bearer " else self.sent("secret")
        if not secret_matches(self.secret, given):
            self.set_status(403)
            self.finish()

    def sent(self, name: str) -> bytes | None:
        """The query argument exactly as sent (percent-decoded), or None unless sent exactly once."""
        values = self.request.query_arguments.get(name)
        return values[0] if values is not None and len(values) == 1 else None

    async def served(self, name: str) -> Served | None:
        """The certificate of the hostname in query argument ``name``; a name that is not UTF-8 is not one."""
        try:
            text = (self.sent(name) or b"").decode()
        except UnicodeDecodeError:
            return None
        return await self.index.lookup(text) if text else None

    def compute_etag(self) -> None:
        return None  # answered at every handshake, never revalidated: no hash of every body

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        if status_code == 405:
            self.set_header("Allow", "GET")
        self.finish()

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        """Tornado's would write the URI, and the secret travels in its query string."""
        if isinstance(value, tornado.web.HTTPError) and value.status_code < 500:
            return
        log.error("unhandled error: %s %s", self.request.method, shown_path(self.request.path), exc_info=(typ, value, tb))

    def answer(self, body: bytes | None) -> None:
        if body is None:
            self.set_status(404)
            self.finish()
            return
        self.set_header("Content-Type", "application/x-pem-file")
        self.finish(body)


class CertificateHandler(_TerminatorHandler):
    async def get(self) -> None:
        served = await self.served("server_name")
        self.answer(None if served is None else served.body)


class AskHandler(_TerminatorHandler):
    async def get(self) -> None:
        served = await self.served("domain")
        self.answer(None if served is None else b"")


class NotFoundHandler(_TerminatorHandler):
    def prepare(self) -> None:
        self.set_status(404)
        self.finish()


def log_request(handler: tornado.web.RequestHandler) -> None:
    """A refusal is a warning (a wrong secret is a misconfigured terminator, or someone trying);
    answers, certificates and unknown names alike, are debug lines: Caddy asks at every handshake."""
    status = handler.get_status()
    level = logging.DEBUG if status in (200, 404) else logging.WARNING
    if access_log.isEnabledFor(level):
        access_log.log(level, "%d %s %s (tls-terminator@%s) %.1fms", status, handler.request.method,
                       shown_path(handler.request.path), handler.request.remote_ip, 1000.0 * handler.request.request_time())


def make_app(index: CertificateIndex, secret: str) -> tornado.web.Application:
    deps = {"index": index, "secret": secret}
    return tornado.web.Application(
        [(r"/caddy/certificate", CertificateHandler, deps), (r"/caddy/ask", AskHandler, deps)],
        default_handler_class=NotFoundHandler, default_handler_args=deps, log_function=log_request, xheaders=False,
    )
