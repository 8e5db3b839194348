"""The portal's sign-in in progress and the safe redirect after it: rules, not HTTP.

A sign-in in progress (its state, nonce, PKCE verifier and where to go afterwards) travels in the
browser's cookie, encrypted and authenticated (AES-GCM under a subkey of the secret key file), so
starting sign-ins costs the server nothing and no flood of ``/login`` can push a real one out. The
server remembers only the states already used, for as long as a sign-in may take, so each one
works once: a replayed callback, even with the cookie that started it, is refused.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

import attrs

from core.crypto import Keyring

if TYPE_CHECKING:
    from store import Store

SIGNIN_SECONDS = 600
MAX_USED = 100_000
_PURPOSE = "portal-signin"


@attrs.frozen
class PendingSignin:
    state: str
    verifier: str
    nonce: str
    next_path: str
    started: float
    "Unix time the sign-in began."


def start_signin(next_path: str) -> PendingSignin:
    return PendingSignin(
        state=secrets.token_urlsafe(24), verifier=secrets.token_urlsafe(48), nonce=secrets.token_urlsafe(24),
        next_path=next_path, started=time.time(),
    )


def seal(keyring: Keyring, pending: PendingSignin) -> str:
    return keyring.encrypt(_PURPOSE, json.dumps(attrs.asdict(pending)), bound_to=_PURPOSE)


def unseal(keyring: Keyring, sealed: str) -> PendingSignin | None:
    """The sign-in a cookie carries, or ``None`` when it was altered, is not ours or is too old."""
    try:
        pending = PendingSignin(**json.loads(keyring.decrypt(_PURPOSE, sealed, bound_to=_PURPOSE)))
    except (ValueError, TypeError):
        return None
    return pending if 0 <= time.time() - pending.started <= SIGNIN_SECONDS else None


class UsedStates:
    """States of finished sign-ins, until they could no longer be used anyway: in memory for one
    process (SQLite), in the database every process shares (PostgreSQL), kept hashed there."""

    def __init__(self, store: Store | None = None) -> None:
        self._used: OrderedDict[str, float] = OrderedDict()
        self.store = store if store is not None and store.pg is not None else None

    async def use(self, state: str) -> bool:
        """True the first time a state is used, by any process; false ever after."""
        if self.store is None:
            return self.use_here(state)
        now = time.time()
        digest = hashlib.sha256(state.encode()).hexdigest()
        return await self.store.run(self.store.shared.use_state, digest, now=now, forget_before=now - SIGNIN_SECONDS)

    def use_here(self, state: str) -> bool:
        now = time.time()
        while self._used and (len(self._used) >= MAX_USED or next(iter(self._used.values())) < now - SIGNIN_SECONDS):
            self._used.popitem(last=False)
        if state in self._used:
            return False
        self._used[state] = now
        return True


def safe_next(path: str | None, default: str = "/domains") -> str:
    """A path on this site to go to after signing in; anything else (another host, ``//host``,
    a scheme, back-slashes) is replaced by the default, so the portal is no open redirect."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path or any(c < " " for c in path):
        return default
    return path
