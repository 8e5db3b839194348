"""Addresses as the configuration writes them."""

from __future__ import annotations

import ipaddress


def parse_nameserver(value: str) -> tuple[str, int]:
    """``"ip"`` or ``"ip:port"`` (``"[v6]:port"`` for IPv6) to (ip, port)."""
    host, port = value, 53
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        if rest:
            port = int(rest.removeprefix(":"))
    elif value.count(":") == 1:
        host, raw_port = value.split(":")
        port = int(raw_port)
    ipaddress.ip_address(host)
    if not 0 < port < 65536:
        raise ValueError("port out of range")
    return host, port
