"""What the TLS terminator is handed: the certificate served for each hostname (store/acme.py
``all_served``: one workspace's, the one proving ownership now), chain then key, held in memory.

Caddy asks at every TLS handshake, so an answer must cost no database read and no decryption:
the index maps each hostname to its PEM bytes, decrypted once. It follows the stored certificates
by their ``last_change()`` (the latest ``updated_at`` and the row count, one cheap query), looked
at most once a second: a lookup in an index older than that checks first when the name is
missing (a certificate issued a moment ago, by this process or another, is then found) and
checks in the background when it is there (a renewal replaces a certificate that is still
valid). Whatever changes, the whole set is read again; keys are decrypted again only for
certificates that changed. A domain deleted, verified or no longer verified touches its
certificates' ``updated_at`` in the same transaction (store/acme.py), so the index sees that too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from core.hostnames import match_key
from store.acme import CERTIFICATE_KEY, AcmeCertificate

if TYPE_CHECKING:
    import datetime as dt

    from core.clock import Clock
    from core.crypto import Keyring
    from store import Store

log = logging.getLogger(__name__)

#: How old the index may be before a lookup checks whether the stored certificates changed.
CHECK_SECONDS = 1.0

Version = tuple[str | None, int]


@attrs.frozen
class Served:
    """One hostname's certificate as the terminator takes it."""

    body: bytes
    "The chain (leaf first), then the private key: PEM, what Caddy's ``get_certificate http`` reads."
    key_start: int
    "Where the key begins in ``body``."
    not_after: dt.datetime | None

    @property
    def chain(self) -> bytes:
        return self.body[:self.key_start]

    @property
    def key(self) -> bytes:
        return self.body[self.key_start:]


def _pem(text: str) -> bytes:
    return text.strip().encode() + b"\n"


class CertificateIndex:
    def __init__(self, store: Store, keyring: Keyring, clock: Clock) -> None:
        self._store = store
        self._keyring = keyring
        self._clock = clock
        self.served: dict[str, Served] = {}
        "By ``match_key``; replaced whole at each reload, never changed in place (a thread may read it)."
        self.version: Version | None = None
        self._checked_at = float("-inf")
        self._check: asyncio.Task[None] | None = None
        self._decrypted: dict[str, tuple[str | None, str | None, Served | None]] = {}
        "By handle: the chain and key ciphertext last decrypted, and what they gave."
        self._listeners: list[Callable[[], None]] = []

    def on_reload(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after each reload that changed what is served."""
        self._listeners.append(callback)

    async def lookup(self, name: str) -> Served | None:
        """The certificate served for ``name``, or None; checks for changes as the docstring says.
        Names match as everywhere else (core/hostnames.py): ASCII case and a trailing dot aside, as
        sent; a name that is not a valid hostname is found nowhere, without a look at the store."""
        key = match_key(name)
        if key is None:
            return None
        served = self.served.get(key)
        stale = self._clock.timestamp() - self._checked_at >= CHECK_SECONDS
        if served is None and (stale or self._checking()):
            await self.refresh()  # joins a look under way (the first, at start-up) or starts one
            return self.served.get(key)
        if stale:
            self._start_check()
        return served

    async def refresh(self) -> None:
        """Look whether the stored certificates changed, and reload them if they did. Callers at the
        same time share one look; a store that cannot be read is logged and the index kept."""
        await self._start_check()

    def _checking(self) -> bool:
        return self._check is not None and not self._check.done()

    def _start_check(self) -> asyncio.Task[None]:
        if self._check is None or self._check.done():
            self._checked_at = self._clock.timestamp()
            self._check = asyncio.ensure_future(self._reload())
        return self._check

    async def _reload(self) -> None:
        started = time.perf_counter()
        try:
            version, rows = await self._store.run(self._read, self.version)
        except Exception as exc:  # noqa: BLE001 - the database away: keep serving what was read before
            log.warning("TLS terminator: cannot read the stored certificates (%s); serving those read before", exc)
            return
        if rows is None:
            return
        self.served = self._index(rows)
        self.version = version
        log.info("TLS terminator: %d hostnames served (read in %.0f ms)", len(self.served), (time.perf_counter() - started) * 1000)
        for listener in self._listeners:
            listener()

    def _read(self, known: Version | None) -> tuple[Version, list[AcmeCertificate] | None]:
        """A unit of work: the version first, so that the rows read are at least as new as it."""
        version = self._store.acme.last_change()
        return version, None if version == known else self._store.acme.all_served()

    def _index(self, rows: list[AcmeCertificate]) -> dict[str, Served]:
        served: dict[str, Served] = {}
        decrypted: dict[str, tuple[str | None, str | None, Served | None]] = {}
        for certificate in rows:
            known = self._decrypted.get(certificate.handle)
            if known is not None and known[:2] == (certificate.chain_pem, certificate.key_ciphertext):
                entry = known[2]
            else:
                entry = self._decrypt(certificate)
            decrypted[certificate.handle] = (certificate.chain_pem, certificate.key_ciphertext, entry)
            name = match_key(certificate.apex)  # stored canonical: itself
            if entry is not None and name is not None and (name not in served or _later(entry, served[name])):
                served[name] = entry
        self._decrypted = decrypted
        return served

    def _decrypt(self, certificate: AcmeCertificate) -> Served | None:
        if certificate.chain_pem is None or certificate.key_ciphertext is None:
            return None
        try:
            key = self._keyring.decrypt(CERTIFICATE_KEY, certificate.key_ciphertext, bound_to=certificate.handle)
        except ValueError as exc:
            # Another service's key file, or a row altered or moved: never served, said once per change.
            log.warning("TLS terminator: the key of certificate %s (%s) does not decrypt (%s); not served",
                        certificate.handle, certificate.apex, exc)
            return None
        chain = _pem(certificate.chain_pem)
        return Served(body=chain + _pem(key), key_start=len(chain), not_after=certificate.not_after)


def _later(entry: Served, other: Served) -> bool:
    """Two certificates of one hostname expiring at the same moment: either will do, the first is kept."""
    return entry.not_after is not None and (other.not_after is None or entry.not_after > other.not_after)
