"""The endpoints' own secret (``[tls_terminator] secret``): the endpoints hand out private keys."""

from __future__ import annotations

import hashlib
import hmac


def secret_matches(expected: str, given: bytes | None) -> bool:
    """Whether ``given``, the bytes as sent, is the secret: exactly, since a secret with white space
    or a control character around it is another string (``%20<secret>``, ``<secret>%00``), and
    in constant time: both are hashed first, so that not even the secret's length shows in how long
    the comparison takes. No secret sent, or none configured, matches nothing."""
    if not expected or given is None:
        return False
    return hmac.compare_digest(hashlib.sha256(given).digest(), hashlib.sha256(expected.encode()).digest())
