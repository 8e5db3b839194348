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


class PortInUse(ConfigError):
    """Another socket holds the address: another program's, or this service's while it runs."""


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


def check(config: Config) -> list[str]:
    """check-config's test of the TCP listeners start-up binds (the delegation zone's DNS is
    checked with its zone, core/delegation_dns/records.py): each bound and let go at once. A port
    in use is a warning naming its key, not a refusal: the service itself holds it while it runs,
    and a command is safe then; if another program holds it, start-up refuses it with the same
    key. Any other failure (an address not of this machine, a port below 1024) is start-up's
    ``ConfigError``."""
    said: list[str] = []
    wanted = [("server.port", "server.host", config.server.host, config.server.port)]
    if config.metrics.listen:
        wanted.append(("metrics.listen", "metrics.listen", *parse_nameserver(config.metrics.listen)))
    terminator = config.tls_terminator
    if terminator.secret and terminator.listen:
        wanted.append(("tls_terminator.listen", "tls_terminator.listen", *parse_nameserver(terminator.listen)))
    for port_key, host_key, host, port in wanted:
        try:
            _probe(port_key, host_key, host, port)
        except PortInUse:
            said.append(f"  WARNING: {port_key}: {host}:{port} is in use by another program, or by this service "
                        "running now; if not by the service, its start-up will refuse it: stop the other program or "
                        "choose another port")
    return said


def _probe(port_key: str, host_key: str, host: str, port: int) -> None:
    """Bind as ``bind_sockets`` does (each address of ``host``, ``SO_REUSEADDR``, IPv6 only on IPv6),
    closing every socket: ``bind_sockets`` leaves the one that failed open."""
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise _error(port_key, host_key, f"{host}:{port}", exc) from None
    for family, kind, proto, _, address in dict.fromkeys(found):
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise _error(port_key, host_key, f"{host}:{port}", exc) from None


def _bind(port_key: str, host_key: str, host: str, port: int) -> list[socket.socket]:
    try:
        return bind_sockets(port, address=host, backlog=LISTEN_BACKLOG)
    except OSError as exc:
        raise _error(port_key, host_key, f"{host}:{port}", exc) from None


def _error(port_key: str, host_key: str, where: str, exc: OSError) -> ConfigError:
    if exc.errno == errno.EADDRINUSE:
        return PortInUse(f"{port_key}: {where} is already in use; stop the other program or choose another port")
    return ConfigError(f"{host_key}: cannot listen on {where}: {exc.strerror}")
