"""The certificate authorities the service orders from, in the configured order, each with our account.

Every call to a CA goes to this module's threads (the ``acme`` package blocks), one request at a
time per call, and comes back as a ``CaDown`` (the CA could not take it: unreachable, 5xx, rate
limited; another CA may) or a ``CaRefused`` (the CA answered about the hostname: a refusal to store,
its problem kept; a hostname the CA paused for our account, or one past its failed-validation
limit, is refused, not the CA down) or its result. A new order names the certificate profile
configured for the CA when its directory offers it (``Ca.order_profile``); when it does not, the
CA's default is ordered and the log says so once, or, with ``profile_required``, the CA is not
ordered from (``ProfileNotOffered``). The directory is read once a process. Each CA has an account of ours, created on first use with a key kept encrypted with
the service's key (store/acme.py); a second process finding one kept uses it.

The account's key is loaded once; the operator may roll it over meanwhile (``roll-account-key``,
core/acme/rollover.py), from another process. A request the CA then refuses as signed by a key it
no longer holds (``unauthorized``, ``malformed``: "JWS verification error", ``badPublicKey``,
``accountDoesNotExist``) has the account read again: when another key is kept now (the account's,
else a rollover's pending one), it is loaded and the request sent again, once. So orders in flight
go on. Only the answer to a challenge is not sent again: the TXT value published was the old key's
(a key authorization names the key), so it waits for the next step, which publishes the new one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

import requests
from acme import errors as acme_errors
from acme import messages

from core.acme import keys
from core.acme.client import CaClient, problem, problem_of, unoffered
from core.acme.problems import Problem, kind_of
from core.clock import Clock
from core.config import AcmeConfig
from core.crypto import Keyring
from store.acme import ACCOUNT_KEY, AcmeAccount

if TYPE_CHECKING:
    from store import Store

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Requests to CAs under way at once (each blocks a thread for its round trip).
THREADS = 8
#: Problem types that say the CA cannot take the request now, not that the hostname is refused.
_DOWN = frozenset({"serverInternal", "rateLimited", "badNonce", "userActionRequired"})
#: Problem types a CA answers a request signed with a key it no longer holds for the account.
_KEY_REFUSED = frozenset({"unauthorized", "malformed", "badPublicKey", "accountDoesNotExist"})


class CaDown(Exception):
    """The CA could not take the request (unreachable, a server error, a rate limit): another may."""

    def __init__(self, message: str, *, rate_limited: bool = False) -> None:
        super().__init__(message)
        self.rate_limited = rate_limited


class CaRefused(Exception):
    """The CA answered, and refused: about the hostname or the order, in its words."""

    def __init__(self, said: str | Problem) -> None:
        self.problem = said if isinstance(said, Problem) else Problem(type="", detail=said)
        super().__init__(f"{self.problem.detail} ({self.problem.type})" if self.problem.type else self.problem.detail)


class ProfileNotOffered(Exception):
    """The CA does not offer the profile configured for it, and ``profile_required`` forbids its default."""


class Ca:
    """One configured CA: its client and our account there."""

    def __init__(self, directory_url: str, config: AcmeConfig, *, executor: ThreadPoolExecutor,
                 profile: str = "") -> None:
        self.directory_url = directory_url
        self.config = config
        self.profile = profile
        "The profile configured for it (``[provider.acme] profile`` or ``fallback_profiles``); empty: its default."
        self._offered: dict[str, str] | None = None
        self._said_default = False
        self.client = CaClient(directory_url, ca_bundle=config.ca_bundle, timeout=config.timeout_seconds)
        self._executor = executor
        self.account_url: str | None = None
        "Our account's URL there, once known (CAA ``accounturi``)."
        self._signing = False
        self._identities: tuple[str, ...] | None = None
        self._kept: tuple[Store, Keyring] | None = None
        "Where the account's key is read again after a rollover, once ``ready``."
        self._key_ciphertext: str | None = None
        "The kept key loaded: the account's, or a rollover's pending one."

    async def call(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """``fn`` in a worker thread, its failures sorted into ``CaDown`` and ``CaRefused``; a
        request refused as signed by a key rolled over meanwhile is sent again with the key kept now."""
        try:
            return await self._call(fn, *args, **kwargs)
        except CaRefused as refusal:
            if refusal.problem.type not in _KEY_REFUSED or not await self._reload_key():
                raise
        if fn == self.client.answer:
            raise CaDown(f"{self.directory_url}: our account's key was rolled over while a challenge was being "
                         "answered; the next step publishes the new key's value and answers it") from None
        log.info("%s refused our account's old key (rolled over): sent again with the key kept now", self.directory_url)
        return await self._call(fn, *args, **kwargs)

    async def _reload_key(self) -> bool:
        """Whether another key than the one loaded is kept for the account now (rolled over by
        another process): if so, it is loaded."""
        if self._kept is None:
            return False
        store, keyring = self._kept
        kept = await store.run(store.acme.account, self.directory_url)
        if kept is None:
            return False
        candidates = [kept.key_ciphertext, kept.pending_key_ciphertext]
        sealed = next((c for c in candidates if c is not None and c != self._key_ciphertext), None)
        if sealed is None:
            return False
        key = keys.account_key(keyring.decrypt(ACCOUNT_KEY, sealed, bound_to=self.directory_url))
        await self._call(self.client.use, key, kept.account_url)
        self._key_ciphertext = sealed
        return True

    async def _call(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, lambda: fn(*args, **kwargs))
        except requests.RequestException as exc:
            raise CaDown(f"{self.directory_url} could not be reached ({type(exc).__name__})") from None
        except messages.Error as exc:
            found = problem_of(exc)
            if found.type in _DOWN and kind_of(found) not in ("paused", "limited"):
                raise CaDown(f"{self.directory_url} answered {problem(exc)}",
                             rate_limited=found.type == "rateLimited") from None
            raise CaRefused(found) from None
        except acme_errors.Error as exc:
            raise CaDown(f"{self.directory_url}: {problem(exc)}") from None

    async def identities(self) -> tuple[str, ...]:
        """Its issuer domains for CAA (``caaIdentities``), read once; empty when it names none."""
        if self._identities is None:
            self._identities = await self.call(self.client.caa_identities)
        return self._identities

    async def offered(self) -> dict[str, str]:
        """The profiles it offers (``meta.profiles``: name -> description), read once; empty when none."""
        if self._offered is None:
            self._offered = await self.call(self.client.profiles)
        return self._offered

    async def order_profile(self) -> str | None:
        """The profile a new order names: the one configured when the CA offers it, else None (the
        CA's default; said once in the log), or ``ProfileNotOffered`` when the profile is required."""
        if not self.profile:
            return None
        offered = await self.offered()
        if self.profile in offered:
            return self.profile
        said = unoffered(self.directory_url, self.profile, offered)
        if self.config.profile_required:
            raise ProfileNotOffered(f"{said} [provider.acme] profile_required is true, so no order goes to it.")
        if not self._said_default:
            log.warning("%s Orders there are for its default profile ([provider.acme] profile_required is false).", said)
            self._said_default = True
        return None

    async def ready(self, store: Store, keyring: Keyring, clock: Clock) -> None:
        """Our account there, registered once and kept (encrypted) for every process."""
        if self._signing:
            return
        kept = await store.run(store.acme.account, self.directory_url)
        if kept is None:
            key_pem = keys.new_key_pem()
            account_url = await self.call(self.client.register, keys.account_key(key_pem),
                                          email=self.config.contact_email, eab_kid=self.config.eab_kid,
                                          eab_hmac_key=self.config.eab_hmac_key)
            sealed = keyring.encrypt(ACCOUNT_KEY, key_pem, bound_to=self.directory_url)
            kept = await store.run(_keep, store, AcmeAccount(directory_url=self.directory_url, account_url=account_url,
                                                             key_ciphertext=sealed, created_at=clock.now()))
            log.info("ACME account at %s: %s", self.directory_url, kept.account_url)
        key = keys.account_key(keyring.decrypt(ACCOUNT_KEY, kept.key_ciphertext, bound_to=self.directory_url))
        await self._call(self.client.use, key, kept.account_url)
        self.account_url, self._signing = kept.account_url, True
        self._kept, self._key_ciphertext = (store, keyring), kept.key_ciphertext


def _keep(store: Store, account: AcmeAccount) -> AcmeAccount:
    with store.transaction():
        return store.acme.add_account(account)


def make_cas(config: AcmeConfig) -> tuple[list[Ca], ThreadPoolExecutor]:
    """The configured CAs, the first one first, sharing one pool of threads."""
    executor = ThreadPoolExecutor(THREADS, thread_name_prefix="acme")
    return [Ca(url, config, executor=executor, profile=profile) for url, profile in config.profiles()], executor
