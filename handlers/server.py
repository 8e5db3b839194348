"""Serving: the Tornado application with every route, the listening sockets, and the loop that runs
until ``SIGTERM`` or ``Ctrl-C`` and then drains."""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
from pathlib import Path

import tornado.web
from tornado.netutil import bind_sockets

import handlers
from core.addresses import parse_nameserver
from core.config import Config, ConfigError
from core.delegation_dns import answers_itself
from core.delegation_dns import server as delegation_dns
from core.hostnames import public_suffixes
from core.runtime.jobs import start_jobs
from core.services import Services
from core.webhooks.worker import WebhookWorker
from handlers import idp
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
    """The listening sockets: the service's, the metrics address's if set, the delegation zone's
    DNS server's if it runs; a port in use is a one-line start-up error, like a config mistake."""
    sockets = _bind("server.port", "server.host", config.server.host, config.server.port)
    metrics_sockets: list[socket.socket] = []
    try:
        if config.metrics.listen:
            host, port = parse_nameserver(config.metrics.listen)
            metrics_sockets = _bind("metrics.listen", "metrics.listen", host, port)
        dns_sockets = delegation_dns.bind(config.delegation_dns.listen) if answers_itself(config) else []
    except ConfigError:
        for sock in sockets + metrics_sockets:
            sock.close()
        raise
    return sockets, metrics_sockets, dns_sockets


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
                dns_sockets: list[socket.socket]) -> None:
    app = make_app(services)
    server = LimitedHTTPServer(app)
    server.add_sockets(sockets)
    log.info("listening on http://%s:%d (base_url %s)", config.server.host, config.server.port, config.server.base_url)
    metrics_server = serve_metrics(services, metrics_sockets)
    dns_server = await serve_delegation_dns(services, dns_sockets)
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
    if metrics_server is not None:
        metrics_server.stop()
    if dns_server is not None:
        await dns_server.stop()
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


async def serve_delegation_dns(services: Services, sockets: list[socket.socket]) -> delegation_dns.DelegationServer | None:
    """The delegation zone's authoritative server, on ``[delegation_dns] listen``, UDP and TCP."""
    if not sockets:
        return None
    config = services.config.delegation_dns
    dns_server = delegation_dns.DelegationServer(config, services.store, services.clock, sockets)
    await dns_server.start()
    log.info("answering DNS for %s on %s (UDP and TCP)", config.zone, config.listen)
    return dns_server
