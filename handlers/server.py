"""Serving: the Tornado application with every route, and the loop that runs until ``SIGTERM`` or
``Ctrl-C`` and then drains (the other listeners: handlers/listeners.py)."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import tornado.web
from tornado.web import RequestHandler

import handlers
from core.config import Config
from core.hostnames import public_suffixes
from core.runtime.jobs import start_jobs
from core.runtime.sockets import Bound
from core.services import Services
from core.webhooks.worker import WebhookWorker
from handlers import listeners
from handlers.base import BaseHandler
from handlers.limits import LimitedHTTPServer
from handlers.log import log_request, route_label
from handlers.portal import idp
from handlers.portal.pages import PageNotFoundHandler
from handlers.static import StaticHandler

log = logging.getLogger("app")
ROOT = Path(__file__).resolve().parent.parent
#: How long a shutdown (SIGTERM, Ctrl-C) waits for requests in progress and webhook sends to finish.
DRAIN_SECONDS = 10
#: How long after listening the public suffix list is parsed, in a thread: after the first answers.
PUBLIC_SUFFIXES_AFTER_SECONDS = 1.0


def make_app(services: Services) -> tornado.web.Application:
    """The Tornado application with every route bound to the shared services."""
    deps = {"services": services}
    active: list[tuple[str, type[RequestHandler]]] = [*handlers.routes]
    if services.dev_idp is not None:
        active += idp.routes
    if services.config.domain_connect.simulate:
        # Here, not above: the simulated DNS host's modules are imported only by the service that is one.
        from handlers.portal import simulated_dns_host

        active += simulated_dns_host.routes
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


async def drain(worker: WebhookWorker) -> None:
    """Let requests in progress and the worker's pass finish (up to ``DRAIN_SECONDS``) before the
    store closes: cut short, they would fail on a closed database. Whatever is still running at
    the deadline is cancelled when the event loop ends; a transaction never spans an await, so
    nothing is left half-written, and unsent deliveries stay queued."""
    deadline = asyncio.get_running_loop().time() + DRAIN_SECONDS
    while (BaseHandler.in_flight or worker.busy) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


async def serve(config: Config, services: Services, bound: Bound) -> None:
    app = make_app(services)
    server = LimitedHTTPServer(app)
    server.add_sockets(bound.server)
    log.info("listening on http://%s:%d (base_url %s)", config.server.host, config.server.port, config.server.base_url)
    others = await listeners.start(services, bound)
    jobs, worker = start_jobs(services)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Parsed in a thread: on the loop, its 0.1 s came before the first requests' answers (issue 49).
    # Not at once: the thread then took the GIL each time the loop let it go (a socket, an SQLite
    # call) and the loop waited its turn back, 0.09 s of the first answer. A request that needs it
    # meanwhile parses it too, rather than wait.
    loop.call_later(PUBLIC_SUFFIXES_AFTER_SECONDS, loop.run_in_executor, None, public_suffixes)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    for job in jobs.values():
        job.stop()
    server.stop()
    await others.stop()
    await drain(worker)
    await server.close_all_connections()
