"""The delegation zone's sockets, bound before the service imports the rest of itself
(core/runtime/sockets.py), hence apart from its server (server.py), which needs dnspython: UDP and
TCP on ``[delegation_dns] listen``, both with ``SO_REUSEPORT``, so that every service process on a
machine binds the same address and the kernel spreads queries between them."""

from __future__ import annotations

import errno
import socket

from core.addresses import parse_nameserver
from core.config import ConfigError


def bind(listen: str) -> list[socket.socket]:
    """A UDP and a TCP socket bound to ``listen`` (not yet listening), or a one-line ``ConfigError``."""
    host, port = parse_nameserver(listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
            sock = socket.socket(family, kind)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if kind == socket.SOCK_STREAM:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.setblocking(False)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ConfigError(_bind_error(listen, port, exc)) from None
    return sockets


def _bind_error(listen: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (f"delegation_dns.listen: {listen} is already in use by another program (the service's processes "
                "share it only when they run as one user); stop that program or choose another address")
    if exc.errno == errno.EACCES and port < 1024:
        return (f"delegation_dns.listen: cannot listen on {listen}: {exc.strerror}; a port below 1024 needs the "
                "capability CAP_NET_BIND_SERVICE, or listen on a higher port and redirect port 53 to it (docs/acme.md, "
                "\"The delegation zone's DNS\")")
    return f"delegation_dns.listen: cannot listen on {listen}: {exc.strerror}"
