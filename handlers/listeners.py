"""The listeners beside the main port, on sockets bound before anything else started
(core/runtime/sockets.py), each served apart from the API:

- ``[metrics] listen``: ``GET /metrics`` with no token, on an address kept private;
- ``[tls_terminator] listen``: the endpoints Caddy asks, which hand out private keys (loopback);
- ``[delegation_dns] listen``: the delegation zone's authoritative DNS server, UDP and TCP.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import TYPE_CHECKING

import attrs
import tornado.web
from tornado.ioloop import IOLoop

from core.addresses import parse_nameserver
from core.runtime.sockets import Bound
from core.services import Services
from handlers import tls_terminator
from handlers.limits import LimitedHTTPServer
from handlers.metrics import MetricsHandler

if TYPE_CHECKING:
    from core.delegation_dns.server import DelegationServer

log = logging.getLogger("app")


@attrs.define
class Running:
    """The other listeners, serving."""

    http: list[LimitedHTTPServer]
    dns: DelegationServer | None

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


async def _delegation_dns(services: Services, sockets: list[socket.socket]) -> DelegationServer | None:
    """The delegation zone's authoritative server, on ``[delegation_dns] listen``, UDP and TCP."""
    if not sockets:
        return None
    from core.delegation_dns import server as delegation_dns  # with its dnspython, only when it serves

    config = services.config.delegation_dns
    server = delegation_dns.DelegationServer(config, services.store, services.clock, sockets, metrics=services.metrics)
    await server.start()
    log.info("answering DNS for %s on %s (UDP and TCP)", config.zone, config.listen)
    return server
