"""Composition root: read the config, open the store, build the app, listen.

``python app.py`` runs on embedded defaults; ``python app.py --config FILE`` reads a TOML file.
A configuration problem stops start-up with one line naming the key, and no traceback.
``python app.py COMMAND --config FILE`` runs one of the operator's commands (core/admin.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import importlib.metadata
import logging
import resource
import signal
import socket
import sqlite3
import sys
from pathlib import Path

import attrs
import tornado.web
from tornado.ioloop import IOLoop, PeriodicCallback
from tornado.netutil import bind_sockets

import handlers
from core import admin, logs
from core.certificates import idempotency
from core.config import Config, ConfigError, load_config, parse_nameserver
from core.crypto import SecretKeyError
from core.hostnames import public_suffixes
from core.services import Services, build_services
from core.webhooks.worker import WebhookWorker
from handlers import idp
from handlers.base import BaseHandler, StaticHandler
from handlers.limits import LimitedHTTPServer
from handlers.log import log_request, route_label
from handlers.metrics import MetricsHandler
from handlers.pages import PageNotFoundHandler

log = logging.getLogger("app")
ROOT = Path(__file__).resolve().parent
#: Pending connections the kernel queues for us: a burst of 500 clients must not overflow it
#: (Tornado's default of 128 makes the overflow retry after a second or three).
LISTEN_BACKLOG = 1024
#: Open files (connections) the service asks the system to allow.
OPEN_FILES = 65536
#: How often Idempotency-Key records older than their retention are purged.
PURGE_INTERVAL_SECONDS = 3600
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


def start_jobs(services: Services) -> tuple[dict[str, PeriodicCallback], WebhookWorker]:
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
    return jobs, worker


async def drain(worker: WebhookWorker) -> None:
    """Let requests in progress and the worker's pass finish (up to ``DRAIN_SECONDS``) before the
    store closes: cut short, they would fail on a closed database. Whatever is still running at
    the deadline is cancelled when the event loop ends; a transaction never spans an await, so
    nothing is left half-written, and unsent deliveries stay queued."""
    deadline = asyncio.get_running_loop().time() + DRAIN_SECONDS
    while (BaseHandler.in_flight or worker.busy) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


def version() -> str:
    try:
        return importlib.metadata.version("certificate-provisioning-service")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout without pip install
        return "unknown"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", metavar="FILE", help="TOML configuration file (default: embedded defaults)")
    parser = argparse.ArgumentParser(
        description="Certificate Provisioning Service. Without a command it serves; the commands are "
                    "the operator's tools and are safe while the service runs.",
        parents=[config],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("serve", parents=[config], help="run the service (the default)")
    commands.add_parser("check-config", parents=[config], help="load the configuration, key file and database, and say what would run")
    backup = commands.add_parser("backup", parents=[config], help="an online, consistent copy of the database")
    backup.add_argument("path", help="the new file to write (must not exist)")
    key = commands.add_parser("create-api-key", parents=[config], help="an API key for automation, printed once")
    key.add_argument("--workspace", required=True, help="the workspace id")
    key.add_argument("--scopes", required=True, help="comma-separated scopes, e.g. domains:read,domains:write or *")
    key.add_argument("--name", default="automation", help="a label for the key (default: automation)")
    key.add_argument("--expires-at", help="ISO 8601 time with offset, e.g. 2027-01-01T00:00:00Z")
    rebind = commands.add_parser("rebind-user", parents=[config],
                                 help="after switching identity provider: let users bind again by verified e-mail")
    who = rebind.add_mutually_exclusive_group(required=True)
    who.add_argument("--email", help="one user")
    who.add_argument("--from-issuer", metavar="URL", help="every user bound to this (old) issuer")
    purge = commands.add_parser("purge", parents=[config], help="drop old idempotency records and delivered webhook deliveries")
    purge.add_argument("--webhook-days", type=int, default=30, help="keep delivered deliveries this many days (default 30)")
    return parser.parse_args(argv)


def run_command(args: argparse.Namespace, config: Config, services: Services) -> list[str]:
    if args.command == "backup":
        return admin.backup(services, args.path)
    if args.command == "create-api-key":
        scopes = [scope.strip() for scope in args.scopes.split(",") if scope.strip()]
        return admin.create_api_key(services, workspace=args.workspace, name=args.name, scopes=scopes,
                                    expires_at=args.expires_at)
    if args.command == "rebind-user":
        return admin.rebind_users(services, email=args.email, from_issuer=args.from_issuer)
    assert args.command == "purge"
    return admin.purge(services, webhook_days=args.webhook_days)


def load(args: argparse.Namespace, *, serving: bool) -> Config:
    config = load_config(args.config)
    # A command prints its own result; its log says only what went wrong.
    logs.configure(config.logging if serving else attrs.evolve(config.logging, level="warning"))
    log.info(
        "configuration %s; database %s; secret key file %s",
        Path(args.config).resolve() if args.config else "(embedded defaults)",
        Path(config.storage.path).resolve(), Path(config.storage.secret_key_file).resolve(),
    )
    return config


def open_services(config: Config) -> Services:
    try:
        return build_services(config)
    except sqlite3.Error as exc:
        raise ConfigError(f"storage.path: cannot open {config.storage.path}: {exc}") from None


def bind(config: Config) -> tuple[list[socket.socket], list[socket.socket]]:
    """The listening sockets (the service's, and the metrics address's if set); a port in use is
    a one-line start-up error, like a config mistake."""
    sockets = _bind("server.port", "server.host", config.server.host, config.server.port)
    if not config.metrics.listen:
        return sockets, []
    host, port = parse_nameserver(config.metrics.listen)
    try:
        return sockets, _bind("metrics.listen", "metrics.listen", host, port)
    except ConfigError:
        for sock in sockets:
            sock.close()
        raise


def _bind(port_key: str, host_key: str, host: str, port: int) -> list[socket.socket]:
    try:
        return bind_sockets(port, address=host, backlog=LISTEN_BACKLOG)
    except OSError as exc:
        where = f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"{port_key}: {where} is already in use; stop the other program or choose another port") from None
        raise ConfigError(f"{host_key}: cannot listen on {where}: {exc.strerror}") from None


async def serve(config: Config, services: Services, sockets: list[socket.socket], metrics_sockets: list[socket.socket]) -> None:
    app = make_app(services)
    server = LimitedHTTPServer(app)
    server.add_sockets(sockets)
    log.info("listening on http://%s:%d (base_url %s)", config.server.host, config.server.port, config.server.base_url)
    metrics_server = serve_metrics(services, metrics_sockets)
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


def raise_open_files_limit() -> None:
    """Every connection is a file descriptor: the common soft limit of 1,024 would refuse the
    1,025th client while the hard limit allows far more. Raise the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, OPEN_FILES), hard))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    serving = args.command in (None, "serve")
    try:
        config = load(args, serving=serving)
        if args.command == "check-config":
            # Before open_services, which would create the database and the secret key file:
            # a check writes nothing.
            try:
                print("\n".join(admin.check_config(config)))
            except admin.CommandError as exc:
                print(exc, file=sys.stderr)
                return 2
            return 0
        if not serving:
            services = open_services(config)
    except (ConfigError, SecretKeyError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    if not serving:
        try:
            print("\n".join(run_command(args, config, services)))
        except admin.CommandError as exc:
            print(exc, file=sys.stderr)
            return 2
        finally:
            services.close()
        return 0
    raise_open_files_limit()
    try:
        sockets, metrics_sockets = bind(config)
    except ConfigError as exc:
        print(f"start-up error: {exc}", file=sys.stderr)
        return 2
    # Bound before the services are built: with port 0, the addresses they sign in with (the
    # development issuer, the redirect URI) must name the port the OS picked.
    config = config.bound_to(sockets[0].getsockname()[1])
    try:
        services = open_services(config)
    except (ConfigError, SecretKeyError) as exc:
        for sock in sockets + metrics_sockets:
            sock.close()
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(config, services, sockets, metrics_sockets))
    finally:
        services.close()  # after the loop ended: no request or job can reach the store any more
    return 0


if __name__ == "__main__":
    sys.exit(main())
