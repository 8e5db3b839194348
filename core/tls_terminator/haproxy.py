"""HAProxy's runtime API (``[tls_terminator] haproxy_runtime``, its ``stats socket`` at level admin):
a renewed certificate replaced in place, without a reload (HAProxy 2.2 and newer).

A certificate is known to HAProxy by the path it loaded it from (``crt /dir/`` and the file's
name), so only a file HAProxy has loaded can be replaced; a new hostname needs the reload. Each
command goes on a connection of its own (HAProxy answers one command, then closes):
``set ssl cert <path> <<`` with the PEM as its payload (which ends at the first empty line), then
``commit ssl cert <path>``.
"""

from __future__ import annotations

import socket

from core.addresses import parse_nameserver

TIMEOUT_SECONDS = 5.0


def replace_certificate(address: str, path: str, pem: bytes) -> str | None:
    """Replace the certificate HAProxy loaded from ``path`` with ``pem`` (chain, then key): None when
    done, else what went wrong, in HAProxy's words (or the socket's)."""
    payload = b"\n".join(line for line in pem.splitlines() if line.strip())  # an empty line would end it
    try:
        answer = _command(address, f"set ssl cert {path} <<\n".encode() + payload + b"\n\n")
        if "Transaction created" not in answer and "Transaction updated" not in answer:
            return _first_line(answer)
        answer = _command(address, f"commit ssl cert {path}\n".encode())
    except OSError as exc:
        return f"{address}: {exc.strerror or exc}"
    return None if "Success!" in answer else _first_line(answer)


def _command(address: str, command: bytes) -> str:
    if address.startswith("/"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target: str | tuple[str, int] = address
    else:
        host, port = parse_nameserver(address)
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        target = (host, port)
    with sock:
        sock.settimeout(TIMEOUT_SECONDS)
        sock.connect(target)
        sock.sendall(command)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.decode(errors="replace")


def _first_line(answer: str) -> str:
    return answer.strip().splitlines()[0] if answer.strip() else "no answer"
