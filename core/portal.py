"""Rules of the server-rendered portal that are not HTTP: pending sign-ins, safe redirects, and
the DNS instructions as a person reads them.

A sign-in in progress (PKCE verifier, nonce, where to go afterwards) is kept here, server-side,
under its ``state``, and can be consumed once: replaying a callback, or the cookie that started
it, finds nothing. Entries expire after ``SIGNIN_SECONDS`` and there are at most ``MAX_PENDING``
(the oldest go first), so abandoned sign-ins cannot grow memory.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict

import attrs

from core.domains import DnsRecord, Validation
from core.hostnames import relative_name, zone_of

SIGNIN_SECONDS = 600
MAX_PENDING = 10_000


@attrs.frozen
class PendingSignin:
    state: str
    verifier: str
    nonce: str
    next_path: str
    created: float


class PendingSignins:
    def __init__(self) -> None:
        self._pending: OrderedDict[str, PendingSignin] = OrderedDict()

    def start(self, next_path: str) -> PendingSignin:
        now = time.monotonic()
        while self._pending and (len(self._pending) >= MAX_PENDING or next(iter(self._pending.values())).created < now - SIGNIN_SECONDS):
            self._pending.popitem(last=False)
        pending = PendingSignin(
            state=secrets.token_urlsafe(24), verifier=secrets.token_urlsafe(48), nonce=secrets.token_urlsafe(24),
            next_path=next_path, created=now,
        )
        self._pending[pending.state] = pending
        return pending

    def finish(self, state: str) -> PendingSignin | None:
        """The sign-in started with ``state``, once; ``None`` when unknown, used or expired."""
        pending = self._pending.pop(state, None)
        if pending is None or pending.created < time.monotonic() - SIGNIN_SECONDS:
            return None
        return pending


def safe_next(path: str | None, default: str = "/domains") -> str:
    """A path on this site to go to after signing in; anything else (another host, ``//host``,
    a scheme, back-slashes) is replaced by the default, so the portal is no open redirect."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path or any(c < " " for c in path):
        return default
    return path


@attrs.frozen
class RecordView:
    """One DNS record, with the host both in full and as the customer's DNS panel asks for it."""

    type: str
    host: str
    relative_host: str
    value: str
    ttl: int


@attrs.frozen
class DnsInstructions:
    zone: str
    delegation: RecordView
    ownership: RecordView


def _view(record: DnsRecord, zone: str) -> RecordView:
    return RecordView(type=record.type, host=record.host, relative_host=relative_name(record.host, zone),
                      value=record.value, ttl=record.ttl)


def dns_instructions(apex: str, validation: Validation) -> DnsInstructions:
    """The two records of a domain as its DNS page and its public verification page show them."""
    zone = zone_of(apex)
    return DnsInstructions(zone=zone, delegation=_view(validation.delegation, zone), ownership=_view(validation.ownership, zone))
