"""The sockets the service listens on beside its main port, each bound before anything else starts
(a port in use is a one-line start-up error, like a config mistake) and served apart from the API:

- ``[metrics] listen``: ``GET /metrics`` with no token, on an address kept private;
- ``[tls_terminator] listen``: the endpoints Caddy asks, which hand out private keys (loopback);
- ``[delegation_dns] listen``: the delegation zone's authoritative DNS server, UDP and TCP.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket

import attrs
import tornado.web
from tornado.ioloop import IOLoop
from tornado.netutil import bind_sockets

from core.addresses import parse_nameserver
from core.config import Config, ConfigError
from core.delegation_dns import answers_itself
from core.delegation_dns import server as delegation_dns
from core.services import Services
from handlers import tls_terminator
from handlers.limits import LimitedHTTPServer
from handlers.metrics import MetricsHandler

log = logging.getLogger("app")
#: Pending connections the kernel queues for us: a burst of 500 clients must not overflow it
#: (Tornado's default of 128 makes the overflow retry after a second or three).
LISTEN_BACKLOG = 1024


@attrs.frozen
class Bound:
    """Every listening socket, by what it serves."""

    server: list[socket.socket]
    metrics: list[socket.socket] = attrs.Factory(list)
    tls_terminator: list[socket.socket] = attrs.Factory(list)
    dns: list[socket.socket] = attrs.Factory(list)

    def close(self) -> None:
        for sock in self.server + self.metrics + self.tls_terminator + self.dns:
            sock.close()


def bind(config: Config) -> Bound:
    """Bind every socket the configuration asks for, or none."""
    bound = Bound(server=_bind("server.port", "server.host", config.server.host, config.server.port))
    try:
        if config.metrics.listen:
            bound.metrics.extend(_bind("metrics.listen", "metrics.listen", *parse_nameserver(config.metrics.listen)))
        terminator = config.tls_terminator
        if terminator.secret and terminator.listen:
            bound.tls_terminator.extend(_bind("tls_terminator.listen", "tls_terminator.listen",
                                              *parse_nameserver(terminator.listen)))
        if answers_itself(config):
            bound.dns.extend(delegation_dns.bind(config.delegation_dns.listen))
    except ConfigError:
        bound.close()
        raise
    return bound


def _bind(port_key: str, host_key: str, host: str, port: int) -> list[socket.socket]:
    try:
        return bind_sockets(port, address=host, backlog=LISTEN_BACKLOG)
    except OSError as exc:
        where = f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"{port_key}: {where} is already in use; stop the other program or choose another port") from None
        raise ConfigError(f"{host_key}: cannot listen on {where}: {exc.strerror}") from None


@attrs.define
class Running:
    """The other listeners, serving."""

    http: list[LimitedHTTPServer]
    dns: delegation_dns.DelegationServer | None

    async def stop(self) -> None:
        for server in self.http:
            server.stop()
        if self.dns is not None:
            await self.dns.stop()


async def start(services: Services, bound: Bound) -> Running:
    http = [server for server in (_metrics(services, bound.metrics), _tls_terminator(services, bound.tls_terminator))
            if server is not None]
    return Running(http=http, dns=await _delegation_dns(services, bound.dns))


def _metrics(services: Services, sockets: list[socket.socket]) -> LimitedHTTPServer | None:
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


def _tls_terminator(services: Services, sockets: list[socket.socket]) -> LimitedHTTPServer | None:
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


async def _delegation_dns(services: Services, sockets: list[socket.socket]) -> delegation_dns.DelegationServer | None:
    """The delegation zone's authoritative server, on ``[delegation_dns] listen``, UDP and TCP."""
    if not sockets:
        return None
    config = services.config.delegation_dns
    server = delegation_dns.DelegationServer(config, services.store, services.clock, sockets)
    await server.start()
    log.info("answering DNS for %s on %s (UDP and TCP)", config.zone, config.listen)
    return server
