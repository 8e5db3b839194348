"""Signed pagination cursors and page sizes, shared by the queries and the lists that page.

A cursor carries the keyset position (sort value, id) of the last row shown, so the next page
starts strictly after it. It is signed with a subkey of the secret key file and bound to what the
caller asked for (workspace, resource, filters, sort): reused with anything else, it is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from core.crypto import Keyring
from core.errors import InvalidCursor, ValidationError

_PURPOSE = "cursor"


def binding(*scope: Any) -> str:
    """A short digest of everything a cursor is bound to (JSON-serialisable parts)."""
    return hashlib.sha256(json.dumps(scope, sort_keys=True).encode()).hexdigest()[:32]


def encode(keyring: Keyring, bound_to: str, position: tuple[str, str]) -> str:
    return keyring.seal(_PURPOSE, {"b": bound_to, "k": list(position)})


def decode(keyring: Keyring, cursor: str, bound_to: str) -> tuple[str, str]:
    """The position a cursor carries; ``InvalidCursor`` if forged or bound to something else."""
    payload = keyring.unseal(_PURPOSE, cursor)
    if payload is None or payload.get("b") != bound_to:
        raise InvalidCursor("The cursor is invalid, or was issued for other filters or another sort.")
    key = payload.get("k")
    if not (isinstance(key, list) and len(key) == 2 and all(isinstance(k, str) for k in key)):
        raise InvalidCursor()
    return key[0], key[1]


def page_size(raw: str | None, *, default: int, maximum: int) -> int:
    """The ``limit`` query argument: 1 to ``maximum``, ``default`` when absent."""
    if raw is None:
        return default
    if not re.fullmatch(r"[0-9]{1,4}", raw) or not 1 <= int(raw) <= maximum:  # isdigit() accepts "²"
        raise ValidationError.field("limit", f"Must be an integer from 1 to {maximum}")
    return int(raw)
