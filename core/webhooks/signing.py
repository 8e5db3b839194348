"""The signature on every delivery attempt (spec, Events): Stripe/GitHub style.

``X-Service-Signature: sha256=<hex HMAC-SHA256>`` over ``<timestamp>.<raw body>``, keyed with the
complete ``whsec_`` secret; ``X-Service-Timestamp`` is that exact timestamp string. Each attempt
is signed anew (fresh timestamp, current secret), so a retry after a rotation verifies with the
new secret.
"""

from __future__ import annotations

import hashlib
import hmac

EVENT_HEADER = "X-Service-Event"
TIMESTAMP_HEADER = "X-Service-Timestamp"
SIGNATURE_HEADER = "X-Service-Signature"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def headers(*, secret: str, event_type: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of one attempt."""
    stamp = str(timestamp)
    return {
        "Content-Type": "application/json",
        EVENT_HEADER: event_type,
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: signature(secret, stamp, body),
    }
