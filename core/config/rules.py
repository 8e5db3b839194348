"""The rules configuration values are checked against, each naming the full TOML key when it fails."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

import attrs

from core.addresses import parse_nameserver


class ConfigError(Exception):
    """A configuration problem, worded for a one-line start-up message."""


def _check(key: str, ok: Any, problem: str, *, echo: bool = True) -> Any:
    """An attrs validator that names the full TOML key in its message; ``echo=False`` for a value
    that may hold a secret (a database URL's password)."""

    def validate(_: Any, __: attrs.Attribute[Any], value: Any) -> None:
        if not ok(value):
            raise ConfigError(f"{key}: {problem}" + (f" (got {value!r})" if echo else ""))

    return validate


def _is_http_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _is_network(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def _all(predicate: Any) -> Any:
    return lambda values: all(predicate(v) for v in values)


def _is_nameserver(value: str) -> bool:
    try:
        parse_nameserver(value)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or the name localhost."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_dc_id(value: str) -> bool:
    """A Domain Connect id or key name: 1-63 of ``[A-Za-z0-9_.-]`` (draft-ietf-dconn ``dc-id``); DNS names
    (key_host) are checked to the same grammar, 253 long at most."""
    return 0 < len(value) <= 253 and all(c.isascii() and (c.isalnum() or c in "_.-") for c in value) and all(
        0 < len(label) <= 63 for label in value.split("."))


def _positive(value: float) -> bool:
    return value > 0


def _is_glob_list(values: list[str]) -> bool:
    return all(isinstance(v, str) and v.strip() for v in values)


def _is_listen_address(value: str) -> bool:
    """Empty, or ``ip:port`` / ``[ipv6]:port`` with the port given."""
    if not value:
        return True
    has_port = "]:" in value if value.startswith("[") else value.count(":") == 1
    try:
        parse_nameserver(value)
    except ValueError:
        return False
    return has_port
