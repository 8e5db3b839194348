"""Taking an ACME order from placed to issued, one step at a time (RFC 8555 section 7.4).

Each step reads the order and does the one thing its status calls for:

| order        | the step                                                                              |
|--------------|---------------------------------------------------------------------------------------|
| ``pending``  | for each authorization still pending: publish the DNS-01 TXT value, and once every server of the delegation zone answers it, tell the CA to validate; a settled one's value goes |
| ``ready``    | the TXT values go (every authorization is valid); finalize it with a request for the order's own key |
| ``processing`` | nothing: the CA is issuing                                                          |
| ``valid``    | download the chain (the default, or the alternate ``preferred_chain`` names): it becomes the certificate served, its key with it; the TXT values go |
| ``invalid``  | note the CA's reasons (its challenges', else the order's), explained; a new order may follow, paced (core/acme/failures.py) |

A server of the zone that does not answer a new value within ``[delegation_dns]
confirm_timeout_seconds`` (or the time the step has) is named in the certificate's ``error``
while the order waits: the CA is not asked to validate what it may not find (it asks from several
places at once, each of which may reach another server), and the next step tries again.

Steps are repeated with short pauses until the order is done or a deadline passes; whatever the
step reached is stored at once (store/acme.py), so a refresh, in this process or another, takes it
on from there. The TXT value is published where the domain's delegation CNAME points, which is
what the CA finds following ``_acme-challenge.<hostname>``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import attrs

from core import lifetimes
from core.acme import chains, keys
from core.acme.cas import Ca, CaRefused
from core.acme.client import Challenge, Order
from core.acme.problems import Problem
from store.acme import CERTIFICATE_KEY, AcmeCertificate

if TYPE_CHECKING:
    from core.clock import Clock
    from core.crypto import Keyring
    from store import Store

log = logging.getLogger(__name__)

#: Pauses between steps: the CA validates in a second or two, issues in a few.
PAUSES = (0.2, 0.5, 1.0, 1.0, 2.0)
#: The least a step waits for the zone's servers to answer a new value, whatever time it has left:
#: each says the serial it answers from a moment after the change.
CONFIRM_AT_LEAST = 2.0


class Records(Protocol):
    """Where DNS-01 TXT values are published (core/delegation_dns/)."""

    async def publish(self, name: str, value: str, *, order_url: str | None = None) -> None: ...

    async def withdraw(self, name: str, value: str) -> None: ...

    async def confirm(self, name: str, value: str, *, within: float) -> list[str]: ...


@attrs.frozen
class Orders:
    """What a step needs beyond the order: the store, keys, the clock and the records."""

    store: Store
    keyring: Keyring
    clock: Clock
    records: Records
    refused: Callable[[AcmeCertificate, Problem], Awaitable[str]]
    "Notes the CA's refusal of the certificate's validation (the pacing's), and says it in a customer's words."
    confirm_seconds: float = 60.0
    "The longest a step waits for every server of the zone to answer a new value (``confirm_timeout_seconds``)."
    preferred_chain: str = ""
    "The issuer of the top certificate of the chain wanted (``[provider.acme] preferred_chain``); empty: the CA's default."

    async def save(self, certificate: AcmeCertificate, *, new: bool = False) -> AcmeCertificate:
        """Store ``certificate``: a ``new`` one (a first order) is added; any other replaces the one
        kept under its handle, which its domain's deletion may have marked (never served again,
        revoked) or the revoke job forgotten since it was read: it is then kept marked, and revoked."""
        now = self.clock.now()
        certificate = attrs.evolve(certificate, updated_at=now)
        if not await self.store.run(_put, self.store, certificate, new, now):
            log.warning("the certificate %s of %s was saved after its domain was deleted: it is revoked",
                        certificate.handle, certificate.apex)
        return certificate

    async def until_done(self, ca: Ca, certificate: AcmeCertificate, target: str, deadline: float) -> AcmeCertificate:
        """Steps until the order is no longer under way, or the loop's clock passes ``deadline``."""
        loop = asyncio.get_running_loop()
        for turn in range(1000):
            certificate = await self.step(ca, certificate, target, deadline)
            if certificate.order_url is None or loop.time() >= deadline:
                return certificate
            await asyncio.sleep(min(PAUSES[min(turn, len(PAUSES) - 1)], max(0.0, deadline - loop.time())))
        return certificate

    async def step(self, ca: Ca, certificate: AcmeCertificate, target: str,
                   deadline: float | None = None) -> AcmeCertificate:
        """One step of the order under way (see the module's table), stored; ``deadline`` (the loop's
        clock) bounds its wait for the zone's servers, though each gets ``CONFIRM_AT_LEAST``."""
        assert certificate.order_url is not None
        order = await ca.call(ca.client.order, certificate.order_url)
        if order.status == "pending":
            waiting = await self._validate(ca, order, target, deadline)
            if waiting != certificate.error:
                if waiting is not None:
                    log.warning("ACME order %s of %s waits: %s", certificate.order_url, certificate.apex, waiting)
                certificate = await self.save(attrs.evolve(certificate, error=waiting))
            return certificate
        if order.status == "ready":
            await self._withdraw(ca, order, target)  # every authorization is valid: the CA reads them no more
            key_pem = self._order_key(certificate)
            await ca.call(ca.client.finalize, order, keys.csr_pem(certificate.apex, key_pem))
            return certificate
        if order.status == "valid" and order.certificate:
            chain = await self._chain(ca, order.certificate, certificate.apex)
            await self._withdraw(ca, order, target)
            return await self.save(self._issued(certificate, chain, order.profile))
        if order.status == "invalid":
            reasons = await self._reasons(ca, order)
            found = reasons[0] if reasons else order.error or Problem("", "the certificate authority refused the order")
            why = await self.refused(certificate, found)
            await self._withdraw(ca, order, target)
            log.info("ACME order for %s at %s invalid: %s", certificate.apex, ca.directory_url, why)
            return await self.save(attrs.evolve(
                certificate, status="invalid", order_url=None, order_key_ciphertext=None, replaces=None, error=why))
        return certificate  # processing: the CA is at work

    async def _chain(self, ca: Ca, certificate_url: str, apex: str) -> str:
        """The chain to serve, exactly as the CA returned it: its default, or the alternate whose top
        certificate ``preferred_chain`` names (core/acme/chains.py). A name none of them has is
        logged, and the default served: a chain the CA no longer offers must not stop issuance."""
        default, alternates = await ca.call(ca.client.download_chains, certificate_url)
        preferred = self.preferred_chain.strip()
        if not preferred or chains.wanted(default, preferred):
            return default
        offered = [chains.top_issuer(default)]
        for url in alternates:
            alternate = await ca.call(ca.client.download, url)
            if not chains.same_leaf(default, alternate):
                log.warning("the alternate chain %s of %s's certificate holds another certificate: ignored", url, apex)
                continue
            if chains.wanted(alternate, preferred):
                log.info("the chain to %r is served for %s (preferred_chain)", preferred, apex)
                return alternate
            offered.append(chains.top_issuer(alternate))
        log.warning("%s offers no chain to %r (preferred_chain) for %s, only to %s: its default chain is served",
                    ca.directory_url, preferred, apex, ", ".join(repr(name) for name in offered))
        return default

    def _order_key(self, certificate: AcmeCertificate) -> str:
        assert certificate.order_key_ciphertext is not None
        return self.keyring.decrypt(CERTIFICATE_KEY, certificate.order_key_ciphertext, bound_to=certificate.handle)

    def _issued(self, certificate: AcmeCertificate, chain: str, profile: str | None) -> AcmeCertificate:
        """The certificate served from now on: the order's chain and key, and the profile the order
        says it was issued under (None: the CA named none, its default)."""
        not_before, not_after = keys.validity(chain)
        return attrs.evolve(
            certificate, status="valid", chain_pem=chain, key_ciphertext=certificate.order_key_ciphertext,
            not_before=not_before, not_after=not_after, profile=profile, renew_at=None, ari_checked_at=None, ari_next_at=None,
            ari_explanation_url=None,
            order_url=None, order_key_ciphertext=None, replaces=None, error=None,
        )

    async def _validate(self, ca: Ca, order: Order, target: str, deadline: float | None) -> str | None:
        """Publish the values of the pending challenges and, once every server of the zone answers
        them, tell the CA to validate: None, or why the CA was not asked (the servers that did not
        answer within the bound, named). A settled authorization's value is withdrawn."""
        answering: list[Challenge] = []
        for url in order.authorizations:
            challenge = await ca.call(ca.client.challenge, url)
            if challenge.status != "pending":  # valid already (reused), or failed: the order says so at the next step
                await self._withdrawn(target, challenge)
                continue
            if challenge.challenge_url is None or challenge.validation is None:
                raise CaRefused(f"The certificate authority offers no DNS-01 challenge for {challenge.identifier}.")
            if challenge.challenge_status == "pending":  # not answered yet: publish, confirm, then ask to validate
                await self.records.publish(target, challenge.validation, order_url=order.url)
                answering.append(challenge)
        within = self.confirm_seconds
        if deadline is not None:
            left = deadline - asyncio.get_running_loop().time()
            within = min(within, max(left, CONFIRM_AT_LEAST))
        missing: list[str] = []
        for challenge in answering:
            assert challenge.validation is not None
            missing += await self.records.confirm(target, challenge.validation, within=within)
        if missing:
            servers = "; ".join(dict.fromkeys(missing))
            return (f"The certificate authority is not asked to validate yet: not every server of the delegation "
                    f"zone answers the new value at {target} ({servers}). The service asks again at the next check.")
        for challenge in answering:
            await ca.call(ca.client.answer, challenge)
        return None

    async def _withdrawn(self, target: str, challenge: Challenge) -> None:
        """The value of a settled authorization, withdrawn (best effort: it expires anyway)."""
        if challenge.validation is None:
            return
        try:
            await self.records.withdraw(target, challenge.validation)
        except Exception as exc:  # noqa: BLE001 (the values expire by themselves: an order never fails for this)
            log.info("the DNS-01 value for %s stays until it expires: %s", target, exc)

    async def _withdraw(self, ca: Ca, order: Order, target: str) -> None:
        """The TXT values of the order's challenges are no longer needed (best effort: they expire anyway)."""
        for url in order.authorizations:
            try:
                challenge = await ca.call(ca.client.challenge, url)
            except Exception as exc:  # noqa: BLE001 (the values expire by themselves: an order never fails for this)
                log.info("the DNS-01 value for %s stays until it expires: %s", target, exc)
                continue
            await self._withdrawn(target, challenge)

    async def _reasons(self, ca: Ca, order: Order) -> list[Problem]:
        """The problems of the order's failed challenges: what the CA met (the order's own problem
        says less: "some challenges have failed")."""
        said: list[Problem] = []
        for url in order.authorizations:
            said += (await ca.call(ca.client.challenge, url)).errors
        return said


def _put(store: Store, certificate: AcmeCertificate, new: bool, now: dt.datetime) -> bool:
    with store.transaction():
        if new:
            store.acme.put(certificate)
            return True
        return store.acme.replace(certificate, now)


def new_order_fields(keyring: Keyring, handle: str, order: Order, replaces: str | None,
                     directory_url: str) -> dict[str, object]:
    """The fields of a certificate with a new order under way: its URL, a new key, what it replaces."""
    key_pem = keys.new_key_pem()
    return {"order_url": order.url, "order_key_ciphertext": keyring.encrypt(CERTIFICATE_KEY, key_pem, bound_to=handle),
            "replaces": replaces, "directory_url": directory_url, "error": None}


def renewal_due(certificate: AcmeCertificate, now: dt.datetime) -> bool:
    """Time to renew: its renewal time has come (or it has none yet and two thirds of its life passed)."""
    if certificate.chain_pem is None or certificate.order_url is not None:
        return False
    if certificate.renew_at is not None:
        return now >= certificate.renew_at
    assert certificate.not_before is not None and certificate.not_after is not None
    return now >= lifetimes.last_third_starts(certificate.not_before, certificate.not_after)
