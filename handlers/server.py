"""Serving: the Tornado application with every route, the listening sockets, and the loop that runs
until ``SIGTERM`` or ``Ctrl-C`` and then drains."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import signal
import socket
from pathlib import Path

import tornado.web
from tornado.ioloop import IOLoop
from tornado.netutil import bind_sockets

import handlers
from core.addresses import parse_nameserver
from core.config import Config, ConfigError
from core.hostnames import public_suffixes
from core.runtime.jobs import start_jobs
from core.services import Services
from core.webhooks.worker import WebhookWorker
from handlers import idp, tls_terminator
from handlers.base import BaseHandler
from handlers.limits import LimitedHTTPServer
from handlers.log import log_request, route_label
from handlers.metrics import MetricsHandler
from handlers.pages import PageNotFoundHandler
from handlers.static import StaticHandler

log = logging.getLogger("app")
ROOT = Path(__file__).resolve().parent.parent
#: Pending connections the kernel queues for us: a burst of 500 clients must not overflow it
#: (Tornado's default of 128 makes the overflow retry after a second or three).
LISTEN_BACKLOG = 1024
#: How long a shutdown (SIGTERM, Ctrl-C) waits for requests in progress and webhook sends to finish.
DRAIN_SECONDS = 10


def make_app(services: Services) -> tornado.web.Application:
    """The Tornado application with every route bound to the shared services."""
    deps = {"services": services}
    active = handlers.routes + (idp.routes if services.dev_idp is not None else [])
    routes = [(pattern, handler, deps) for pattern, handler in active]
    app = tornado.web.Application(
        routes,
        metrics=services.metrics,
        route_labels={handler: route_label(pattern) for pattern, handler in active} | {StaticHandler: "/static/:param"},
        cookie_secret=services.keyring.subkey("cookie").hex(),
        default_handler_class=PageNotFoundHandler,
        default_handler_args=deps,
        static_path=str(ROOT / "static"),
        static_handler_class=StaticHandler,
        log_function=log_request,
        # Every portal form carries the XSRF token; the JSON API authenticates by bearer only
        # (it never reads cookies), so ApiHandler opts out.
        xsrf_cookies=True,
        xsrf_cookie_kwargs={"httponly": True, "samesite": "Lax", "secure": services.config.server.secure_cookies},
        login_url="/login",
        xheaders=False,  # client IPs come from server.trusted_proxies, not from any peer
    )
    # Tornado puts its static-file routes (/static/, /favicon.ico, /robots.txt) before ours, so
    # every API request tried them first; no route of ours matches their paths, so they go last.
    rules = app.wildcard_router.rules
    rules.sort(key=lambda rule: rule.target is StaticHandler)
    return app


def bind(config: Config) -> tuple[list[socket.socket], list[socket.socket], list[socket.socket]]:
    """The listening sockets (the service's, the metrics address's if set, and the TLS terminator
    endpoints' while they have a secret); a port in use is a one-line start-up error, like a config
    mistake."""
    sockets = _bind("server.port", "server.host", config.server.host, config.server.port)
    extra: list[list[socket.socket]] = []
    terminator = config.tls_terminator
    for key, listen in (("metrics.listen", config.metrics.listen),
                        ("tls_terminator.listen", terminator.listen if terminator.secret else "")):
        try:
            extra.append(_bind(key, key, *parse_nameserver(listen)) if listen else [])
        except ConfigError:
            for sock in sockets + [s for bound in extra for s in bound]:
                sock.close()
            raise
    return sockets, extra[0], extra[1]


def _bind(port_key: str, host_key: str, host: str, port: int) -> list[socket.socket]:
    try:
        return bind_sockets(port, address=host, backlog=LISTEN_BACKLOG)
    except OSError as exc:
        where = f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"{port_key}: {where} is already in use; stop the other program or choose another port") from None
        raise ConfigError(f"{host_key}: cannot listen on {where}: {exc.strerror}") from None


async def drain(worker: WebhookWorker) -> None:
    """Let requests in progress and the worker's pass finish (up to ``DRAIN_SECONDS``) before the
    store closes: cut short, they would fail on a closed database. Whatever is still running at
    the deadline is cancelled when the event loop ends; a transaction never spans an await, so
    nothing is left half-written, and unsent deliveries stay queued."""
    deadline = asyncio.get_running_loop().time() + DRAIN_SECONDS
    while (BaseHandler.in_flight or worker.busy) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


async def serve(config: Config, services: Services, sockets: list[socket.socket], metrics_sockets: list[socket.socket],
                terminator_sockets: list[socket.socket] | None = None) -> None:
    app = make_app(services)
    server = LimitedHTTPServer(app)
    server.add_sockets(sockets)
    log.info("listening on http://%s:%d (base_url %s)", config.server.host, config.server.port, config.server.base_url)
    metrics_server = serve_metrics(services, metrics_sockets)
    terminator_server = serve_tls_terminator(services, terminator_sockets or [])
    jobs, worker = start_jobs(services)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.call_soon(public_suffixes)  # parsed once listening, so that start-up does not wait for it
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    for job in jobs.values():
        job.stop()
    server.stop()
    for other in (metrics_server, terminator_server):
        if other is not None:
            other.stop()
    await drain(worker)
    await server.close_all_connections()


def serve_metrics(services: Services, sockets: list[socket.socket]) -> LimitedHTTPServer | None:
    """``GET /metrics`` with no token on ``[metrics] listen``, a separate address kept private."""
    if not sockets:
        return None
    app = tornado.web.Application(
        [(r"/metrics", MetricsHandler, {"services": services, "open_access": True})], log_function=lambda _: None,
    )
    server = LimitedHTTPServer(app)
    server.add_sockets(sockets)
    log.info("metrics on http://%s/metrics", services.config.metrics.listen)
    return server




def serve_tls_terminator(services: Services, sockets: list[socket.socket]) -> LimitedHTTPServer | None:
    """The TLS terminator's endpoints on ``[tls_terminator] listen``, apart from the main port: they
    hand out private keys (handlers/tls_terminator.py)."""
    if not sockets or services.tls_terminator is None:
        return None
    settings = services.config.tls_terminator
    server = LimitedHTTPServer(tls_terminator.make_app(services.tls_terminator, settings.secret))
    server.add_sockets(sockets)
    IOLoop.current().add_callback(services.tls_terminator.refresh)  # loaded before the first handshake asks
    host, _ = parse_nameserver(settings.listen)
    if not ipaddress.ip_address(host).is_loopback:
        log.warning("tls_terminator.listen %s is not a loopback address: its endpoints hand out private keys, "
                    "keep it reachable by the TLS terminator alone", settings.listen)
    log.info("TLS terminator endpoints on http://%s/caddy/", settings.listen)
    return server
