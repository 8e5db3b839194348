"""``[provider] kind = "acme"``: the service as the ACME client of a certificate authority, behind the
edge provider interface (core/edge/__init__.py), so issuance, refresh, states, events, idempotency,
pacing, the watcher, the portal and the diagnosis work as they do with Cloudflare.

- **The delegation.** A domain's ``_acme-challenge`` CNAME points to a name of its own under
  ``[delegation_dns] zone``: an HMAC of the hostname under the service's key, so it is stable,
  unguessable, and the same wherever the hostname is added. DNS-01 follows the CNAME there, where
  the service publishes the TXT value (core/delegation_dns/).
- **Issue** places a new order at the first configured CA that may issue (its CAA identities
  allowed, by account and method, RFC 8657) and can take it (up, not rate limiting us: else the
  next one), then takes it as far as it gets in ``wait_seconds``: issued, refused, or under way.
- **Refresh** takes an order under way further; for an issued certificate, it reads the CA's
  renewal window (ARI, RFC 9773) now and then, and renews once its time has come, with an order
  that names the certificate it replaces. The certificate served stays until its successor is
  issued. **Revalidate** (a refused order, and the records found right) places a new order.
- **Pacing.** New orders take from a budget per CA (``orders_per_window`` per ``window_seconds``,
  Let's Encrypt's limits by default), shared fairly between workspaces like Cloudflare's
  (core/edge/pacing.py), and across processes on PostgreSQL.

The provider's words map to our states as Cloudflare's do (core/certificates/states.py):
hostname ``active`` once a certificate was issued (``pending`` before), ssl ``pending_validation``
while an order is under way, ``active`` once issued, ``invalid`` when the CA refused the last order
(a renewal's too: the certificate issued before is still served until it expires, and the next
check that finds the records places a new order). The Certificate's ``provider`` keeps the spec's value; its
``issuer`` names the CA.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import logging
import uuid
from typing import TYPE_CHECKING

import attrs

from core.acme import keys
from core.acme.cas import Ca, CaDown, CaRefused, make_cas
from core.acme.orders import Orders, Records, new_order_fields, renewal_due
from core.dns import caa, chain
from core.edge import HostnameGone, ProviderBusy, ProviderRejected, ProviderState, ProviderUnavailable
from core.edge.pacing import Pacer
from store.acme import AcmeCertificate

if TYPE_CHECKING:
    from core.clock import Clock
    from core.config import Config
    from core.crypto import Keyring
    from core.dns.lookups import Resolver
    from store import Store

log = logging.getLogger(__name__)

#: How often an issued certificate's renewal window is read again from its CA (ARI).
ARI_EVERY = dt.timedelta(hours=6)
#: Without a retry time, the wait a rate-limited CA gets.
RATE_LIMITED_SECONDS = 3600


class AcmeProvider:
    name = "edge_provider_for_saas"
    "The spec's one provider identifier; the issuer names the CA."

    def __init__(self, config: Config, *, keyring: Keyring, clock: Clock, store: Store, dns: Resolver,
                 records: Records) -> None:
        self.config = config.provider.acme
        self.zone = config.delegation_dns.zone.lower().rstrip(".")
        self.fallback_issuers = config.provider.caa_issuers
        self.keyring, self.clock, self.store, self.dns = keyring, clock, store, dns
        self.cas, self._executor = make_cas(self.config)
        self.orders = Orders(store=store, keyring=keyring, clock=clock, records=records)
        self.pacers: dict[str, Pacer] = {}
        for ca in self.cas:
            pacer = Pacer(self.config.orders_per_window, self.config.window_seconds,
                          background_share=config.lifecycle.provider_share,
                          workspace_share=config.provider.workspace_share)
            if store.pg is not None:  # every process orders from the same accounts
                pacer.share_with_processes(store, f"acme:{ca.directory_url}")
            self.pacers[ca.directory_url] = pacer

    def close(self) -> None:
        for ca in self.cas:
            ca.client.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- the delegation --------------------------------------------------------------------------

    async def delegation_target(self, apex: str) -> str:
        return self.target(apex)

    def target(self, apex: str) -> str:
        """``<label>.<zone>``: 26 base32 characters (130 bits) of an HMAC of the hostname."""
        digest = self.keyring.mac("acme-delegation", apex.lower().rstrip("."))
        label = base64.b32encode(bytes.fromhex(digest)).decode().lower().rstrip("=")[:26]
        return f"{label}.{self.zone}"

    async def caa_issuers(self) -> list[caa.CaaIssuer]:
        """Every configured CA's issuer domains (``caaIdentities``, else ``[provider] caa_issuers``), with
        our account there once known."""
        issuers = []
        for ca in self.cas:
            if ca.account_url is None:  # an account another process (or an earlier run) registered
                kept = await self.store.run(self.store.acme.account, ca.directory_url)
                if kept is not None:
                    ca.account_url = kept.account_url
            issuers += self._issuers_of(ca, await self._identities(ca))
        return issuers

    # -- the operations of EdgeProvider -------------------------------------------------------------

    async def issue(self, apex: str, *, trace_id: uuid.UUID) -> ProviderState:
        await self._check_delegation(apex)
        now = self.clock.now()
        certificate = AcmeCertificate(handle=uuid.uuid4().hex, apex=apex, directory_url="", status="pending",
                                      created_at=now, updated_at=now)
        certificate = await self._new_order(certificate, replaces=None, trace_id=trace_id)
        return await self._state(await self._finish(certificate))

    async def refresh(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        certificate = await self._load(hostname_id)
        if certificate.order_url is not None:
            certificate = await self._finish(certificate)
        elif certificate.status == "valid":
            # A certificate from a CA no longer configured (staging, before production) is replaced now.
            known = any(ca.directory_url == certificate.directory_url for ca in self.cas)
            if known:
                certificate = await self._renewal_window(certificate)
            if (not known or renewal_due(certificate, self.clock.now())) and await self._delegated(apex):
                replaces = keys.ari_id(certificate.chain_pem) if certificate.chain_pem else None
                log.info("renewing %s (trace %s)", apex, trace_id)
                certificate = await self._finish(await self._new_order(certificate, replaces=replaces, trace_id=trace_id))
        return await self._state(certificate)

    async def revalidate(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        """A refused order, and the records are right now: a new order."""
        certificate = await self._load(hostname_id)
        if certificate.order_url is None and certificate.status == "invalid":
            await self._check_delegation(apex)
            replaces = keys.ari_id(certificate.chain_pem) if certificate.chain_pem else None
            certificate = await self._finish(await self._new_order(certificate, replaces=replaces, trace_id=trace_id))
            return attrs.evolve(await self._state(certificate), revalidated=True)
        return await self.refresh(hostname_id, apex=apex, trace_id=trace_id)

    # -- orders --------------------------------------------------------------------------------

    async def _delegated(self, apex: str) -> bool:
        """Whether ``_acme-challenge.<apex>`` leads to the domain's target now, as the CA will find
        it: no order is placed otherwise, so a validation bound to fail never counts against the
        CA's limits. A renewal is left for later; drift says why (core/domains/drift.py)."""
        owner, target = f"_acme-challenge.{apex}", self.target(apex)
        found = await self.dns.lookup(owner, "CNAME")
        if found.outcome != "found":
            return False
        return (await chain.follow(self.dns, owner, found.values[0], target)).end == "target"

    async def _check_delegation(self, apex: str) -> None:
        if not await self._delegated(apex):
            raise ProviderRejected(f"The CNAME at _acme-challenge.{apex} does not lead to {self.target(apex)}, so no "
                                   "order was placed with the certificate authority; publish it, then check again.",
                                   asked=False)

    async def _new_order(self, certificate: AcmeCertificate, *, replaces: str | None,
                         trace_id: uuid.UUID) -> AcmeCertificate:
        """A new order at the first CA that may issue and can take it; stored before anything else."""
        permitted = await caa.preflight(self.dns, certificate.apex, await self.caa_issuers())
        tried: list[str] = []
        busy: list[float] = []
        for ca in self.cas:
            identities = await self._identities(ca)
            if permitted.permitted is not None and not set(self._domains(identities)) & set(permitted.permitted):
                tried.append(f"{ca.directory_url}: not allowed by the hostname's CAA records")
                continue
            try:
                await ca.ready(self.store, self.keyring, self.clock)
                await self.pacers[ca.directory_url].acquire()
                same_ca = certificate.directory_url == ca.directory_url
                order = await ca.call(ca.client.new_order, certificate.apex, replaces=replaces if same_ca else None)
            except CaDown as down:
                log.warning("ACME order for %s: %s (trace %s)", certificate.apex, down, trace_id)
                tried.append(str(down))
                if down.rate_limited:
                    busy.append(RATE_LIMITED_SECONDS)
                continue
            except ProviderBusy as exc:  # our own pacing of this CA's orders
                tried.append(f"{ca.directory_url}: the service's order budget for it is spent")
                busy.append(exc.retry_after)
                continue
            except CaRefused as refused:
                raise ProviderRejected(f"The certificate authority refused the order: {refused}") from None
            log.info("ACME order for %s at %s: %s (trace %s)", certificate.apex, ca.directory_url, order.url, trace_id)
            fields = new_order_fields(self.keyring, certificate.handle, order, replaces if same_ca else None,
                                      ca.directory_url)
            return await self.orders.save(attrs.evolve(certificate, **fields))  # type: ignore[arg-type]
        said = "; ".join(tried) or "no certificate authority is configured"
        if busy and len(busy) == len(tried):
            raise ProviderBusy(int(min(busy)), f"No certificate authority can take a new order now ({said}).")
        if not permitted.allowed:
            raise ProviderRejected(permitted.message or f"CAA allows none of the certificate authorities ({said}).")
        raise ProviderUnavailable(f"No certificate authority could take the order ({said}); try again shortly.")

    async def _finish(self, certificate: AcmeCertificate) -> AcmeCertificate:
        """The order under way taken as far as ``wait_seconds`` allows."""
        ca = self._ca(certificate.directory_url)
        deadline = asyncio.get_running_loop().time() + self.config.wait_seconds
        try:
            certificate = await self.orders.until_done(ca, certificate, self.target(certificate.apex), deadline)
        except CaDown as down:
            raise ProviderUnavailable(f"The certificate authority could not be asked: {down}; try again shortly.") from None
        except CaRefused as refused:
            certificate = await self.orders.save(attrs.evolve(
                certificate, status="invalid", order_url=None, order_key_ciphertext=None, replaces=None,
                error=str(refused)))
        if certificate.order_url is None and certificate.status == "valid" and certificate.renew_at is None:
            certificate = await self._renewal_window(certificate)
        return certificate

    async def _renewal_window(self, certificate: AcmeCertificate) -> AcmeCertificate:
        """When to renew: a moment in the CA's window (RFC 9773 section 4.2: uniformly spread over
        the window, across certificates), read again every few hours; without ARI, two thirds into
        the certificate's life."""
        now = self.clock.now()
        if certificate.chain_pem is None or (
                certificate.ari_checked_at is not None and now < certificate.ari_checked_at + ARI_EVERY):
            return certificate
        ca = self._ca(certificate.directory_url)
        try:
            window = await ca.call(ca.client.renewal_window, certificate.chain_pem)
        except (CaDown, CaRefused) as exc:
            log.info("renewal window of %s not read: %s", certificate.apex, exc)
            window = None
        if window is not None:
            renew_at = window.start + (window.end - window.start) * _place(certificate.chain_pem)
        else:
            assert certificate.not_before is not None and certificate.not_after is not None
            renew_at = certificate.not_before + (certificate.not_after - certificate.not_before) * 2 / 3
        return await self.orders.save(attrs.evolve(certificate, renew_at=renew_at, ari_checked_at=now))

    # -- helpers -------------------------------------------------------------------------------

    async def _load(self, handle: str) -> AcmeCertificate:
        certificate = await self.store.run(self.store.acme.certificate, handle)
        if certificate is None:
            raise HostnameGone("The service has no ACME certificate of this id (a domain moved from another "
                               "provider): issue a new certificate.")
        return certificate

    def _ca(self, directory_url: str) -> Ca:
        for ca in self.cas:
            if ca.directory_url == directory_url:
                return ca
        raise ProviderUnavailable(f"The certificate authority {directory_url} is no longer configured; issue again.")

    async def _identities(self, ca: Ca) -> tuple[str, ...]:
        try:
            return await ca.identities()
        except CaDown:
            return ()

    def _domains(self, identities: tuple[str, ...]) -> list[str]:
        return [i.lower() for i in identities] or [i.lower() for i in self.fallback_issuers]

    def _issuers_of(self, ca: Ca, identities: tuple[str, ...]) -> list[caa.CaaIssuer]:
        return [caa.CaaIssuer(domain, ca.account_url) for domain in self._domains(identities)]

    async def _state(self, certificate: AcmeCertificate) -> ProviderState:
        """What the provider reports, in the words core/certificates/states.py reads."""
        if certificate.order_url is not None:
            ssl = "pending_validation"
        elif certificate.status == "invalid":
            ssl = "invalid"
        else:
            ssl = "active"
        issued = certificate.chain_pem is not None
        return ProviderState(
            hostname_id=certificate.handle,
            hostname_status="active" if issued else "pending",
            ssl_status=ssl,
            certificate_id=keys.ari_id(certificate.chain_pem) if certificate.chain_pem else None,
            issuer=keys.issuer_name(certificate.chain_pem) if certificate.chain_pem else None,
            issued_at=certificate.not_before,
            expires_at=certificate.not_after,
            errors=(certificate.error,) if certificate.error else (),
            renew_at=certificate.renew_at,
        )


def _place(chain_pem: str) -> float:
    """Where in its window a certificate renews, 0 to 1: random across certificates, the same at each
    reading of one certificate's window, so a window read again does not move a renewal that is due."""
    return int.from_bytes(hashlib.sha256(chain_pem.encode()).digest()[:8], "big") / 2**64
