"""``ac_live_`` API keys: generation, keyed hashing, lookup, rotation and revocation.

A key is ``ac_live_`` + 32 random base62 characters (about 190 bits) + a 6-character base62
CRC32 of them. The checksum lets a mistyped or made-up key fail before any database work and
lets secret scanners recognise real keys. Only an HMAC-SHA256 of the key is stored, under a
subkey of the master secret, so a copy of the database cannot even confirm a guessed key.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import math
import re
import secrets
import threading
import time
import uuid
import zlib
from typing import TYPE_CHECKING, Any

import attrs

from core.errors import InvalidApiKey, NotFound, ValidationError
from core.identity.scopes import SCOPES
from core.text import shown
from store.records import ApiKey, Workspace

if TYPE_CHECKING:
    from core.services import Services

KEY_PREFIX = "ac_live_"
#: Notified (store.notify) with a key's id when it is revoked or rotated: every process forgets it.
KEYS_CHANNEL = "cps_keys"
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_RANDOM_CHARS = 32
_CHECKSUM_CHARS = 6
#: Shown characters of the random part: enough to tell keys apart in a list, too few to matter.
_PREFIX_RANDOM_CHARS = 8
#: ``lastUsedAt`` is written at most this often per key, so reads do not become writes.
LAST_USED_RESOLUTION = dt.timedelta(minutes=1)
NAME_MAX = 200
_SHAPE = re.compile(KEY_PREFIX + f"[0-9A-Za-z]{{{_RANDOM_CHARS + _CHECKSUM_CHARS}}}")


@attrs.frozen
class CreateKeyRequest:
    name: str
    scopes: list[str] | None = None
    expires_at: dt.datetime | None = None


def _base62(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, digit = divmod(number, 62)
        digits.append(_ALPHABET[digit])
    return "".join(reversed(digits))


def _checksum(body: str) -> str:
    return _base62(zlib.crc32(body.encode()), _CHECKSUM_CHARS)


def new_secret() -> tuple[str, str]:
    """A fresh key and its display prefix."""
    body = "".join(secrets.choice(_ALPHABET) for _ in range(_RANDOM_CHARS))
    secret = KEY_PREFIX + body + _checksum(body)
    return secret, secret[: len(KEY_PREFIX) + _PREFIX_RANDOM_CHARS]


def well_formed(secret: str) -> bool:
    """Shape and checksum, checked before touching the database."""
    if not _SHAPE.fullmatch(secret):
        return False
    body = secret[len(KEY_PREFIX) :]
    return hmac.compare_digest(_checksum(body[:_RANDOM_CHARS]), body[_RANDOM_CHARS:])


def _hash(services: Services, secret: str) -> str:
    return services.keyring.mac("api-key-hash", secret)


def is_expired(key: ApiKey, now: dt.datetime) -> bool:
    return key.expires_at is not None and key.expires_at <= now


def present(key: ApiKey, now: dt.datetime) -> ApiKey:
    """The key as shown: an active key past its expiry reads ``expired``."""
    if key.status == "active" and is_expired(key, now):
        return attrs.evolve(key, status="expired")
    return key


class KeyCache:
    """Keys that authenticated recently, so a busy client costs neither a database read nor the
    HMAC per request (OpenSSL's HMAC set-up was the dearest step of a cached request), nor a unit
    of work: a cached key whose ``lastUsedAt`` is not due is answered on the event loop alone.

    Entries are found by a BLAKE2b of the secret under a random key made when the process starts:
    the cache holds no secret, and a dict lookup's timing tells an attacker nothing about any key.
    Rotation and revocation drop a key's entry at once (``forget``); entries also expire after
    ``TTL_SECONDS`` so that a change made outside this process is seen soon. Expiry is checked
    against the clock on every request, cached or not, as a float: building and comparing
    datetimes was a measurable part of a cached request.

    ``get`` and ``put`` run on the event loop; ``forget`` also in a unit of work's thread (on
    PostgreSQL), so it touches the dict only with single operations, which the GIL keeps whole.
    """

    TTL_SECONDS = 30.0

    def __init__(self) -> None:
        self._salt = secrets.token_bytes(32)
        self._entries: dict[bytes, CachedKey] = {}
        self.forgotten = 0
        "Counts ``forget`` calls: a key read before one of them is not cached after it (``put``)."
        self._counting = threading.Lock()  # forget runs in units' worker threads too (PostgreSQL)

    def _slot(self, secret: str) -> bytes:
        return hashlib.blake2b(secret.encode(), key=self._salt, digest_size=32).digest()

    def get(self, secret: str) -> CachedKey | None:
        entry = self._entries.get(self._slot(secret))
        if entry is None or time.monotonic() - entry.cached_at > self.TTL_SECONDS:
            return None
        return entry

    def put(self, secret: str, key: ApiKey, workspace: Workspace, *, read_after: int | None = None) -> CachedKey:
        """The entry for a key; kept unless ``read_after`` (``forgotten`` when the key was read)
        says that a rotation or revocation may have dropped it since, while it was being read."""
        entry = CachedKey(key, workspace, time.monotonic())
        if read_after is not None and read_after != self.forgotten:
            return entry
        if len(self._entries) > 10_000:
            self._entries.clear()  # a crude bound; refilling costs one read per key
        self._entries[self._slot(secret)] = entry
        return entry

    def forget_id(self, key_id: str | None) -> None:
        """What another process said (``KEYS_CHANNEL``): this key changed, or (None) any may have."""
        if key_id is None:
            with self._counting:
                self.forgotten += 1
            self._entries.clear()
        else:
            self.forget(uuid.UUID(key_id))

    def forget(self, key_id: uuid.UUID) -> None:
        with self._counting:
            self.forgotten += 1
        for slot, entry in list(self._entries.items()):
            if entry.key.id == key_id:
                self._entries.pop(slot, None)


@attrs.define(slots=True)
class CachedKey:
    """A key as the cache holds it, with its times as floats for the check on every request."""

    key: ApiKey
    workspace: Workspace
    cached_at: float
    expires: float = attrs.field(init=False)
    "When the key stops working (infinity when it never expires)."
    touch_after: float = attrs.field(init=False)
    "When ``last_used_at`` is next written."
    caller: Any = attrs.field(init=False, default=None)
    "``core.identity.auth``'s caller for this key, made once and reused while the entry lives."
    principal: Any = attrs.field(init=False, default=None)
    "``core.identity.auth``'s principal for this key in its workspace, made once likewise."

    def __attrs_post_init__(self) -> None:
        self.expires = self.key.expires_at.timestamp() if self.key.expires_at is not None else math.inf
        last = self.key.last_used_at
        self.touch_after = -math.inf if last is None else (last + LAST_USED_RESOLUTION).timestamp()


def _lookup(services: Services, secret: str) -> tuple[ApiKey, Workspace] | None:
    """The key behind a well-formed secret, read from the database."""
    digest = _hash(services, secret)
    match = None
    for candidate, workspace in services.store.api_keys.with_prefix(secret[: len(KEY_PREFIX) + _PREFIX_RANDOM_CHARS]):
        # Constant-time comparison: response timing says nothing about how much of a hash matched.
        if hmac.compare_digest(candidate.secret_hash, digest):
            match = (candidate, workspace)
    return match


def _read_and_touch(
    services: Services, secret: str, known: tuple[ApiKey, Workspace] | None
) -> tuple[ApiKey, Workspace] | None:
    """A unit of work: the key behind the secret (read unless the cache knows it), with its
    ``last_used_at`` written when a usable key is due for it."""
    match = known if known is not None else _lookup(services, secret)
    if match is None:
        return None
    key, workspace = match
    now = services.clock.now()
    due = key.last_used_at is None or now >= key.last_used_at + LAST_USED_RESOLUTION
    if key.status == "active" and not is_expired(key, now) and due:
        services.store.api_keys.touch(key.id, now)
        key = attrs.evolve(key, last_used_at=now)
    return key, workspace


def cached(services: Services, secret: str) -> CachedKey | None:
    """``authenticate`` when the cache answers alone (no ``lastUsedAt`` due), else None: a plain
    call, so that the request of a busy client makes no coroutine for it."""
    entry = services.key_cache.get(secret)
    if entry is None:
        return None
    now = services.clock.timestamp()
    if entry.key.status != "active" or entry.expires <= now:
        raise InvalidApiKey()
    return entry if now < entry.touch_after else None


async def authenticate(services: Services, secret: str) -> CachedKey:
    """The active, unexpired key behind a secret and its workspace, or ``InvalidApiKey``.

    A cached key costs no unit of work until its ``lastUsedAt`` is due (once a minute); a key not
    cached costs one, which reads it and writes ``lastUsedAt`` together.
    """
    cache = services.key_cache
    entry = cache.get(secret)
    if entry is not None:
        now = services.clock.timestamp()
        if entry.key.status != "active" or entry.expires <= now:
            raise InvalidApiKey()
        if now < entry.touch_after:
            return entry
        known: tuple[ApiKey, Workspace] | None = (entry.key, entry.workspace)
    elif not well_formed(secret):  # only secrets that matched a key are cached: well formed
        raise InvalidApiKey()
    else:
        known = None
    read_after = cache.forgotten
    match = await services.store.run(_read_and_touch, services, secret, known)
    if match is None:
        raise InvalidApiKey()
    entry = cache.put(secret, *match, read_after=read_after)
    if entry.key.status != "active" or entry.expires <= services.clock.timestamp():
        raise InvalidApiKey()
    return entry


def _validate(services: Services, request: CreateKeyRequest) -> tuple[str, list[str]]:
    field_errors: dict[str, list[str]] = {}
    name = request.name.strip()
    if not name:
        field_errors["name"] = ["Must not be empty"]
    elif len(name) > NAME_MAX:
        field_errors["name"] = [f"Must be at most {NAME_MAX} characters"]
    scopes = list(dict.fromkeys(request.scopes or []))
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown:
        allowed = ", ".join(SCOPES)
        field_errors["scopes"] = [f"Unknown scope '{shown(s)}'; allowed scopes are: {allowed}" for s in unknown]
    if request.expires_at is not None and request.expires_at <= services.clock.now():
        field_errors["expiresAt"] = ["Must be in the future"]
    if field_errors:
        raise ValidationError(field_errors=field_errors)
    return name, scopes


def create(services: Services, *, workspace_id: uuid.UUID, request: CreateKeyRequest) -> tuple[ApiKey, str]:
    """A new key; the secret is returned here and never again."""
    name, scopes = _validate(services, request)
    secret, prefix = new_secret()
    key = ApiKey(
        id=uuid.uuid4(),
        workspace_id=workspace_id,
        name=name,
        prefix=prefix,
        secret_hash=_hash(services, secret),
        scopes=scopes,
        status="active",
        created_at=services.clock.now(),
        expires_at=request.expires_at,
    )
    with services.store.transaction():
        services.store.api_keys.insert(key)
    return present(key, services.clock.now()), secret


def _load(services: Services, workspace_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey:
    key = services.store.api_keys.get(workspace_id, key_id)
    if key is None:
        raise NotFound("API key not found.")
    return key


def list_keys(services: Services, *, workspace_id: uuid.UUID) -> list[ApiKey]:
    now = services.clock.now()
    return [present(k, now) for k in services.store.api_keys.list(workspace_id)]


def rotate(services: Services, *, workspace_id: uuid.UUID, key_id: uuid.UUID) -> tuple[ApiKey, str]:
    """A new secret for the same key; the old one stops at once. Status, scopes, expiry stay.

    A revoked or expired key stays revoked or expired: rotation never brings a key back.
    """
    secret, prefix = new_secret()
    with services.store.transaction():
        _load(services, workspace_id, key_id)
        services.store.api_keys.replace_secret(key_id, prefix=prefix, secret_hash=_hash(services, secret))
        key = _load(services, workspace_id, key_id)
        services.store.notify(KEYS_CHANNEL, str(key_id))
    services.key_cache.forget(key_id)
    return present(key, services.clock.now()), secret


def revoke(services: Services, *, workspace_id: uuid.UUID, key_id: uuid.UUID) -> None:
    """Revoke a key; revoking it again changes nothing."""
    with services.store.transaction():
        _load(services, workspace_id, key_id)
        services.store.api_keys.revoke(key_id, services.clock.now())
        services.store.notify(KEYS_CHANNEL, str(key_id))
    services.key_cache.forget(key_id)
