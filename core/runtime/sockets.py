"""Every socket the service listens on, bound before anything else starts: a port in use is a
one-line start-up error, like a config mistake, and clients can connect (their connections wait in
the backlog) while the rest of the service is imported and built.

This module imports little on purpose: app.py binds with it before importing handlers/, the
capabilities and the store, which is most of start-up (issue 41: 0.3 of 0.45 s).
The sockets are served by handlers/server.py and handlers/listeners.py.
"""

from __future__ import annotations

import errno
import socket

import attrs
from tornado.netutil import bind_sockets

from core.addresses import parse_nameserver
from core.config import Config, ConfigError
from core.delegation_dns import answers_itself
from core.delegation_dns import sockets as delegation_dns

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
