"""Composition root: read the config, open the store, build the app, listen.

``python app.py`` runs on embedded defaults; ``python app.py --config FILE`` reads a TOML file.
A configuration problem stops start-up with one line naming the key, and no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import importlib.metadata
import logging
import signal
import socket
import sqlite3
import sys
from pathlib import Path

import tornado.web
from tornado.ioloop import IOLoop, PeriodicCallback
from tornado.netutil import bind_sockets

import handlers
from core.certificates import idempotency
from core.config import Config, ConfigError, load_config
from core.crypto import SecretKeyError
from core.services import Services, build_services
from core.webhooks.worker import WebhookWorker
from handlers import idp
from handlers.base import StaticHandler
from handlers.limits import LimitedHTTPServer
from handlers.log import log_request
from handlers.pages import PageNotFoundHandler

log = logging.getLogger("app")
ROOT = Path(__file__).resolve().parent
#: Pending connections the kernel queues for us: a burst of 500 clients must not overflow it
#: (Tornado's default of 128 makes the overflow retry after a second or three).
LISTEN_BACKLOG = 1024
#: How often Idempotency-Key records older than their retention are purged.
PURGE_INTERVAL_SECONDS = 3600


def make_app(services: Services) -> tornado.web.Application:
    """The Tornado application with every route bound to the shared services."""
    deps = {"services": services}
    active = handlers.routes + (idp.routes if services.dev_idp is not None else [])
    routes = [(pattern, handler, deps) for pattern, handler in active]
    return tornado.web.Application(
        routes,
        cookie_secret=services.keyring.subkey("cookie").hex(),
        default_handler_class=PageNotFoundHandler,
        default_handler_args=deps,
        static_path=str(ROOT / "static"),
        static_handler_class=StaticHandler,
        log_function=log_request,
        # Every portal form carries the XSRF token; the JSON API authenticates by bearer only
        # (it never reads cookies), so ApiHandler opts out.
        xsrf_cookies=True,
        xsrf_cookie_kwargs={"httponly": True, "samesite": "Lax"},
        login_url="/login",
        xheaders=False,  # client IPs come from server.trusted_proxies, not from any peer
    )


def start_jobs(services: Services) -> dict[str, PeriodicCallback]:
    """The periodic jobs, started with the server and stopped at shutdown.

    The webhook worker also runs as soon as a transaction that queued events commits, and once at
    start for whatever was queued before a restart.
    """
    worker = WebhookWorker(services)
    services.store.outbox.listen(worker.wake)
    jobs = {
        "webhooks": PeriodicCallback(worker.tick, services.config.webhooks.poll_interval_seconds * 1000, jitter=0.1),
        "idempotency-purge": PeriodicCallback(lambda: idempotency.purge(services), PURGE_INTERVAL_SECONDS * 1000),
    }
    for job in jobs.values():
        job.start()
    IOLoop.current().add_callback(worker.tick)
    return jobs


def version() -> str:
    try:
        return importlib.metadata.version("certificate-provisioning-service")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout without pip install
        return "unknown"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Certificate Provisioning Service")
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file (default: embedded defaults)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    return parser.parse_args(argv)


def load(argv: list[str] | None) -> tuple[Config, Services]:
    args = parse_args(argv)
    config = load_config(args.config)
    log.info(
        "configuration %s; database %s; secret key file %s",
        Path(args.config).resolve() if args.config else "(embedded defaults)",
        Path(config.storage.path).resolve(), Path(config.storage.secret_key_file).resolve(),
    )
    try:
        services = build_services(config)
    except sqlite3.Error as exc:
        raise ConfigError(f"storage.path: cannot open {config.storage.path}: {exc}") from None
    return config, services


def bind(config: Config) -> list[socket.socket]:
    """The listening sockets; a port in use is a one-line start-up error, like a config mistake."""
    try:
        return bind_sockets(config.server.port, address=config.server.host, backlog=LISTEN_BACKLOG)
    except OSError as exc:
        where = f"{config.server.host}:{config.server.port}"
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"server.port: {where} is already in use; stop the other program or choose another port") from None
        raise ConfigError(f"server.host: cannot listen on {where}: {exc.strerror}") from None


async def serve(config: Config, services: Services, sockets: list[socket.socket]) -> None:
    app = make_app(services)
    server = LimitedHTTPServer(app)
    server.add_sockets(sockets)
    port = sockets[0].getsockname()[1]  # the one the OS picked when the config says 0
    log.info("listening on http://%s:%d (base_url %s)", config.server.host, port, config.server.base_url)
    jobs = start_jobs(services)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    for job in jobs.values():
        job.stop()
    server.stop()
    await server.close_all_connections()
    services.close()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config, services = load(argv)
    except (ConfigError, SecretKeyError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    try:
        sockets = bind(config)
    except ConfigError as exc:
        services.close()
        print(f"start-up error: {exc}", file=sys.stderr)
        return 2
    asyncio.run(serve(config, services, sockets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
