"""The endpoints' own secret (``[tls_terminator] secret``): the endpoints hand out private keys."""

from __future__ import annotations

import hashlib
import hmac


def secret_matches(expected: str, given: str) -> bool:
    """Whether ``given`` is the secret, in constant time: both are hashed first, so that not even
    the secret's length shows in how long the comparison takes. No secret configured matches nothing."""
    if not expected:
        return False
    return hmac.compare_digest(hashlib.sha256(given.encode()).digest(), hashlib.sha256(expected.encode()).digest())
