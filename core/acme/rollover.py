"""Rolling an ACME account's key over (RFC 8555 section 7.3.5), the operator's ``roll-account-key``.

The account stays (its URL, so CAA ``accounturi`` bindings and ARI ``replaces`` keep working); only
its key changes: the CA is asked, with a request signed by the old key, to take a new one, which
then signs everything. It blocks (the ``acme`` package does): a command runs it, never the loop.

The order of the writes is what makes a rollover safe to stop anywhere:

1. the new key is kept, encrypted, as the account's *pending* key (store/acme.py
   ``begin_key_change``), before the CA hears of it;
2. the CA is asked to change keys;
3. it refused (it answered a problem): the pending key goes, the old key stays the account's;
   it took the key: the new key becomes the account's, the old one is overwritten (forgotten).

Stopped between 2 and 3 (the CA could not be heard from, the database could not be written), the
pending key is still in the database: a serving process refused with the old key tries it
(core/acme/cas.py), and the command run again asks the CA which key it holds
(``onlyReturnExisting``) and finishes, or drops a pending key the CA never took and rolls anew.

Serving processes keep the key they loaded until the CA refuses it; then they read the account
again and retry once with the key now kept (core/acme/cas.py ``Ca.call``), so orders in flight go on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import requests
from acme import errors as acme_errors
from acme import messages

from core.acme import keys
from core.acme.client import CaClient, problem
from store.acme import ACCOUNT_KEY

if TYPE_CHECKING:
    from core.config import AcmeConfig
    from core.crypto import Keyring
    from store import Store
    from store.acme import AcmeAccount

log = logging.getLogger(__name__)


class RolloverError(Exception):
    """The rollover at one CA did not happen or did not finish: what happened, and what to do."""


def roll(store: Store, keyring: Keyring, acme: AcmeConfig, directory_url: str) -> str:
    """Roll our account's key at ``directory_url`` over to a new one: what was done, in a line.
    ``RolloverError`` says why not, and whether the old key still serves."""
    kept = store.acme.account(directory_url)
    if kept is None:
        return (f"{directory_url}: no account yet (one is registered, with a new key, at the first order there); "
                "nothing to roll over")
    client = CaClient(directory_url, ca_bundle=acme.ca_bundle, timeout=acme.timeout_seconds)
    try:
        try:
            client.client  # noqa: B018 (the directory, read first: a CA that cannot be reached is asked nothing)
        except (requests.RequestException, acme_errors.Error, messages.Error) as exc:
            raise RolloverError(f"{directory_url}: the CA could not be reached ({_why(exc)}); nothing was changed, "
                                "the account keeps its key") from None
        finished = ""
        if kept.pending_key_ciphertext is not None:
            finished = _settle(store, keyring, client, kept)
            kept = store.acme.account(directory_url)
            assert kept is not None
        return finished + _change(store, keyring, client, kept)
    finally:
        client.close()


def _change(store: Store, keyring: Keyring, client: CaClient, kept: AcmeAccount) -> str:
    url = kept.directory_url
    old = keys.account_key(keyring.decrypt(ACCOUNT_KEY, kept.key_ciphertext, bound_to=url))
    new_pem = keys.new_key_pem()
    sealed = keyring.encrypt(ACCOUNT_KEY, new_pem, bound_to=url)
    try:
        with store.transaction():
            begun = store.acme.begin_key_change(url, sealed)
    except Exception as exc:  # noqa: BLE001 (the database's errors, either backend's: the CA was not asked)
        raise RolloverError(f"{url}: the new key could not be written to the database ({type(exc).__name__}: "
                            f"{exc}); the CA was not asked, the account keeps its key") from None
    if not begun:
        raise RolloverError(f"{url}: another rollover's key is pending (a command running now?); the account "
                            "keeps its key: run the command again once that one is done")
    client.use(old, kept.account_url)
    try:
        client.change_key(keys.account_key(new_pem))
    except messages.Error as exc:  # the CA answered: it refused the change
        _forget(store, url, sealed)
        raise RolloverError(f"{url}: the CA refused the key change: {problem(exc)}; the account keeps its key") from None
    except (requests.RequestException, acme_errors.Error) as exc:
        # Whether the CA took it is not known: the pending key stays, and is settled next time.
        raise RolloverError(f"{url}: the CA's answer to the key change was not heard ({_why(exc)}): it may or may "
                            "not hold the new key, kept pending in the database, where serving processes try it if "
                            "the old one is refused; run the command again: it asks the CA which key it holds "
                            "and finishes") from None
    _finish(store, url, sealed, what="the new key")
    log.info("ACME account key rolled over at %s (%s)", url, kept.account_url)
    return f"{url}: account {kept.account_url} now signs with a new key; the old key is forgotten"


def _settle(store: Store, keyring: Keyring, client: CaClient, kept: AcmeAccount) -> str:
    """A rollover left half-way: ask the CA whether it holds the pending key. Held: it becomes the
    account's; not: it goes. What was done, to say before the new rollover's line."""
    url, pending = kept.directory_url, kept.pending_key_ciphertext
    assert pending is not None
    key = keys.account_key(keyring.decrypt(ACCOUNT_KEY, pending, bound_to=url))
    try:
        holder = client.account_of(key)
    except messages.Error as exc:
        raise RolloverError(f"{url}: a rollover left half-way could not be settled: the CA answered "
                            f"{problem(exc)}; run the command again later") from None
    except (requests.RequestException, acme_errors.Error) as exc:
        raise RolloverError(f"{url}: a rollover left half-way could not be settled: the CA was not heard "
                            f"({_why(exc)}); run the command again once it answers") from None
    if holder == kept.account_url:
        _finish(store, url, pending, what="the pending key of a rollover left half-way")
        return f"{url}: the CA held the new key of a rollover left half-way: it is the account's key now; "
    _forget(store, url, pending)
    return f"{url}: the CA never took the pending key of a rollover left half-way: it was dropped; "


def _finish(store: Store, url: str, sealed: str, *, what: str) -> None:
    try:
        with store.transaction():
            store.acme.finish_key_change(url, sealed)
    except Exception as exc:  # noqa: BLE001 (the database's errors, either backend's: said with what to do)
        log.error("ACME account key rollover at %s: the CA holds the new key but the database did not record it", url)
        raise RolloverError(
            f"{url}: THE CA NOW HOLDS THE NEW KEY, BUT THE DATABASE COULD NOT RECORD IT as the account's key "
            f"({type(exc).__name__}: {exc}). It is kept there as the pending key, which serving processes try when "
            "the old one is refused. Fix the database, then run roll-account-key again: it finds the CA holding "
            f"{what} and records it. Do not restore a backup taken before now without running it again.") from None


def _forget(store: Store, url: str, sealed: str) -> None:
    try:
        with store.transaction():
            store.acme.drop_pending_key(url, sealed)
    except Exception:  # noqa: BLE001 (a pending key the CA never took is harmless: settled next time)
        log.warning("ACME account at %s: a pending key the CA refused stays until the next rollover", url)


def _why(exc: BaseException) -> str:
    return problem(exc) if isinstance(exc, (acme_errors.Error, messages.Error)) else type(exc).__name__
