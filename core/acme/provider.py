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
  renewal window (ARI, RFC 9773) when the CA's ``Retry-After`` says (six hours without one), and
  renews once its time has come (at once for a window the CA moved into the past), with an order
  that names the certificate it replaces; a CA that refuses the name (``alreadyReplaced``, or a
  certificate another account issued) gets the order again without it. The certificate served
  stays until its successor is issued. **Revalidate** (a refused order, and the records found
  right) places a new order. Only while a verified domain's Certificate record names it: never
  for a domain deleted, or that left ``verified`` (its hostname moved to another workspace).
- **Refused validations** are explained in a customer's words (core/acme/problems.py), and the
  hostname's next order is paced so that it neither meets the same resolver cache nor passes the
  CA's failed-validation limits (core/acme/failures.py); a hostname the CA paused is ordered again
  only once a person asks.
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
import logging
import uuid
from typing import TYPE_CHECKING

import attrs

from core.acme import failures, keys, renewal, reported
from core.acme.cas import Ca, CaDown, CaRefused, ProfileNotOffered, make_cas
from core.acme.orders import Orders, Records, new_order_fields, renewal_due
from core.acme.problems import Problem, explain, kind_of, replaces_refused
from core.delegation_dns.answers import NEGATIVE_TTL
from core.dns import caa, chain
from core.dns.probe import zone_negative_ttl
from core.dns.zone_check import last_check
from core.edge import (
    HostnameGone,
    ProviderBusy,
    ProviderRejected,
    ProviderState,
    ProviderUnavailable,
)
from core.edge.pacing import BACKGROUND, Pacer, not_deferrable
from store.acme import AcmeCertificate

if TYPE_CHECKING:
    from core.clock import Clock
    from core.config import Config
    from core.crypto import Keyring
    from core.dns.lookups import Resolver
    from store import Store

log = logging.getLogger(__name__)

#: Without a retry time, the wait a rate-limited CA gets.
RATE_LIMITED_SECONDS = 3600
#: The negative TTL assumed of an operator's zone (``mode = "rfc2136"``) whose SOA could not be read.
UNKNOWN_NEGATIVE_TTL = 300


class AcmeProvider:
    name = "edge_provider_for_saas"
    "The spec's one provider identifier; the issuer names the CA."

    def __init__(self, config: Config, *, keyring: Keyring, clock: Clock, store: Store, dns: Resolver,
                 records: Records) -> None:
        self.config = config.provider.acme
        self.zone = config.delegation_dns.zone.lower().rstrip(".")
        self.fallback_issuers = config.provider.caa_issuers
        self.keyring, self.clock, self.store, self.dns = keyring, clock, store, dns
        self._negative: int | None = NEGATIVE_TTL if config.delegation_dns.mode == "builtin" else None
        self.cas, self._executor = make_cas(self.config)
        self.orders = Orders(store=store, keyring=keyring, clock=clock, records=records, refused=self._refused,
                             confirm_seconds=config.delegation_dns.confirm_timeout_seconds,
                             preferred_chain=self.config.preferred_chain)
        self.pacers: dict[str, Pacer] = {}
        for ca in self.cas:
            pacer = Pacer(self.config.orders_per_window, self.config.window_seconds,
                          background_share=config.lifecycle.provider_share,
                          workspace_share=config.provider.workspace_share,
                          new_workspace_share=config.provider.new_workspace_share,
                          calls_per_hostname=config.provider.calls_per_active_hostname)
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
        records = await self._check_delegation(apex)
        now = self.clock.now()
        certificate = AcmeCertificate(handle=uuid.uuid4().hex, apex=apex, directory_url="", status="pending",
                                      created_at=now, updated_at=now)
        certificate = await self._new_order(certificate, replaces=None, trace_id=trace_id, records=records,
                                            new=True)
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
            due = known and renewal_due(certificate, self.clock.now())
            if (not known or due) and await self._renewable(certificate):
                records = await self._delegated(apex)
                held = await self._hold(apex, records) if records is not None else None
                if held is not None:
                    log.info("renewal of %s waits: %s (trace %s)", apex, held.why, trace_id)
                elif records is not None:
                    replaces = keys.ari_id(certificate.chain_pem) if certificate.chain_pem else None
                    log.info("renewing %s (trace %s)", apex, trace_id)
                    certificate = await self._finish(await self._new_order(certificate, replaces=replaces,
                                                                           trace_id=trace_id, records=records, due=due))
        return await self._state(certificate)

    async def revalidate(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        """A refused order, and the records are right now: a new order, unless the pacing of failed
        validations holds it (then the state as it is, which says until when)."""
        certificate = await self._load(hostname_id)
        if certificate.order_url is None and certificate.status == "invalid" and await self._renewable(certificate):
            records = await self._check_delegation(apex)
            held = await self._hold(apex, records)
            if held is not None:
                log.info("no new order for %s yet: %s (trace %s)", apex, held.why, trace_id)
                return await self._state(certificate)
            replaces = keys.ari_id(certificate.chain_pem) if certificate.chain_pem else None
            certificate = await self._finish(await self._new_order(certificate, replaces=replaces, trace_id=trace_id,
                                                                   records=records))
            return attrs.evolve(await self._state(certificate), revalidated=True)
        return await self.refresh(hostname_id, apex=apex, trace_id=trace_id)

    # -- orders --------------------------------------------------------------------------------

    async def _delegated(self, apex: str) -> str | None:
        """Whether ``_acme-challenge.<apex>`` leads to the domain's target now, as the CA will find
        it: no order is placed otherwise, so a validation bound to fail never counts against the
        CA's limits. A renewal is left for later; drift says why (core/domains/drift.py). When it
        does: the names on the way, which a stop of failed validations compares (``records``)."""
        owner, target = f"_acme-challenge.{apex}", self.target(apex)
        found = await self.dns.lookup(owner, "CNAME")
        if found.outcome != "found":
            return None
        followed = await chain.follow(self.dns, owner, found.values[0], target)
        return str(followed) if followed.end == "target" else None

    async def _renewable(self, certificate: AcmeCertificate) -> bool:
        """Whether a new order may replace ``certificate``: its domain is still verified and not
        deleted (store/acme.py ``renewable``). A hostname whose ownership record went to another
        workspace is renewed there, never here too."""
        if await self.store.run(self.store.acme.renewable, certificate.handle):
            return True
        log.info("%s (%s) is not renewed: no verified domain names it", certificate.handle, certificate.apex)
        return False

    async def _check_delegation(self, apex: str) -> str:
        records = await self._delegated(apex)
        if records is None:
            raise ProviderRejected(f"The CNAME at _acme-challenge.{apex} does not lead to {self.target(apex)}, so no "
                                   "order was placed with the certificate authority; publish it, then check again.",
                                   asked=False)
        return records

    async def _new_order(self, certificate: AcmeCertificate, *, replaces: str | None, trace_id: uuid.UUID,
                         records: str, new: bool = False, due: bool = False) -> AcmeCertificate:
        """A new order at the first CA that may issue and can take it; stored before anything else.
        ``due``: a renewal whose time has come, which takes its turn before the background checks'.
        A CA holding back the hostname's orders after failed validations (core/acme/failures.py) is
        passed over, as is one that paused the hostname; when every CA does, nothing is ordered."""
        permitted = await caa.preflight(self.dns, certificate.apex, await self.caa_issuers())
        holds = await self._holds(certificate.apex, records)
        tried: list[str] = []
        busy: list[float] = []
        held: list[failures.Held] = []
        refused: list[str] = []
        unoffered: list[str] = []
        excluded = 0
        now = self.clock.now()
        for ca in self.cas:
            identities = await self._identities(ca)
            if permitted.permitted is not None and not set(self._domains(identities)) & set(permitted.permitted):
                tried.append(f"{ca.directory_url}: not allowed by the hostname's CAA records")
                excluded += 1
                continue
            hold = holds[ca.directory_url]
            if hold is not None:
                tried.append(f"{ca.directory_url}: {hold.why}")
                held.append(hold)
                continue
            same_ca = certificate.directory_url == ca.directory_url
            sent = replaces if same_ca else None
            try:
                profile = await ca.order_profile()
                await ca.ready(self.store, self.keyring, self.clock)
                with not_deferrable(due):
                    await self.pacers[ca.directory_url].acquire()
                try:
                    order = await ca.call(ca.client.new_order, certificate.apex, replaces=sent, profile=profile)
                except CaRefused as refusal:
                    if sent is None or not replaces_refused(refusal.problem):
                        raise
                    log.warning("%s refused the order's replaces for %s (%s): ordered again without it (trace %s)",
                                ca.directory_url, certificate.apex, refusal, trace_id)
                    sent = None
                    order = await ca.call(ca.client.new_order, certificate.apex, replaces=None, profile=profile)
            except ProfileNotOffered as exc:  # the operator's configuration: this CA, for every hostname
                log.warning("ACME order for %s: %s (trace %s)", certificate.apex, exc, trace_id)
                tried.append(str(exc))
                unoffered.append(str(exc))
                continue
            except CaDown as down:
                log.warning("ACME order for %s: %s (trace %s)", certificate.apex, down, trace_id)
                tried.append(str(down))
                if down.rate_limited:
                    busy.append(RATE_LIMITED_SECONDS)
                continue
            except ProviderBusy as exc:  # our own pacing of this CA's orders
                tried.append(f"{ca.directory_url}: {reported.busy(exc)}")
                busy.append(exc.retry_after)
                continue
            except CaRefused as refusal:
                why = await self._refused(attrs.evolve(certificate, directory_url=ca.directory_url), refusal.problem)
                if kind_of(refusal.problem) not in ("paused", "limited"):
                    raise ProviderRejected(f"The certificate authority refused the order. {why}") from None
                tried.append(f"{ca.directory_url}: {why}")  # this CA, for this hostname: another may issue
                refused.append(why)
                continue
            log.info("ACME order for %s at %s%s: %s (trace %s)", certificate.apex, ca.directory_url,
                     f' (profile "{profile}")' if profile else "", order.url, trace_id)
            fields = new_order_fields(self.keyring, certificate.handle, order, sent, ca.directory_url)
            return await self.orders.save(attrs.evolve(certificate, **fields), new=new)  # type: ignore[arg-type]
        said = "; ".join(tried) or "no certificate authority is configured"
        if refused:
            raise ProviderRejected(" ".join(refused))
        if unoffered and len(unoffered) + excluded == len(tried):
            raise ProviderRejected(" ".join(unoffered) + " The service's operator must change the profile or the "
                                   "certificate authority; nothing in this domain's records can.", asked=False)
        if held and len(held) + len(busy) + excluded == len(tried):
            waits = [(h.until - now).total_seconds() if h.until is not None else failures.HOUR.total_seconds()
                     for h in held] + busy
            raise ProviderBusy(int(min(waits)) + 1, " ".join(h.why for h in held))
        if busy and len(busy) == len(tried):
            raise ProviderBusy(int(min(busy)), f"No certificate authority can take a new order now ({said}).")
        if not permitted.allowed:
            raise ProviderRejected(permitted.message or f"CAA allows none of the certificate authorities ({said}).")
        raise ProviderUnavailable(f"No certificate authority could take the order ({said}); try again shortly.")

    async def _finish(self, certificate: AcmeCertificate) -> AcmeCertificate:
        """The order under way taken as far as ``wait_seconds`` allows."""
        ca = self._ca(certificate.directory_url)
        deadline = asyncio.get_running_loop().time() + self.config.wait_seconds
        ordered = certificate.order_url is not None
        try:
            certificate = await self.orders.until_done(ca, certificate, self.target(certificate.apex), deadline)
        except CaDown as down:
            raise ProviderUnavailable(f"The certificate authority could not be asked: {down}; try again shortly.") from None
        except CaRefused as refusal:
            certificate = await self.orders.save(attrs.evolve(
                certificate, status="invalid", order_url=None, order_key_ciphertext=None, replaces=None,
                error=await self._refused(certificate, refusal.problem)))
        if ordered and certificate.order_url is None and certificate.status == "valid":
            await self.store.run(failures.note_issued, self.store, certificate.directory_url, certificate.apex, self.clock.now())
        if certificate.order_url is None and certificate.status == "valid" and certificate.renew_at is None:
            certificate = await self._renewal_window(certificate)
        return certificate

    # -- failed validations (core/acme/failures.py) --------------------------------------------

    async def _refused(self, certificate: AcmeCertificate, found: Problem) -> str:
        """The CA refused the certificate's hostname: its words explained, the failure noted (when
        the next order may go). Orders.step and ``_new_order`` call it."""
        apex = certificate.apex
        refusal = explain(found, apex=apex, target=self.target(apex), negative_ttl=await self._negative_ttl())
        zone = await self.store.run(last_check, self.store, self.zone)
        if zone is not None and zone.broken:  # the cause, not the customer's records (core/dns/zone_check.py)
            refusal = attrs.evolve(refusal, words=f"{refusal.words} {zone.message} The service's operator must fix "
                                                  "that; nothing in this domain's records can.")
        records = await self._delegated(apex)
        noted = await self.store.run(failures.note_failure, self.store, certificate.directory_url, apex, refusal,
                                     self.clock.now(), await self._limits(), records)
        log.warning("the certificate authority %s refused %s (%s, %d in a row, %d in the last hour); next order "
                    "after %s%s", certificate.directory_url, apex, refusal.kind, noted.consecutive, len(noted.recent),
                    noted.next_order_at, f"; stopped ({noted.stopped})" if noted.stopped else "")
        return refusal.words

    async def _holds(self, apex: str, records: str | None) -> dict[str, failures.Held | None]:
        """At each CA, why ``apex`` may not be ordered now (a person's request lifts a stop)."""
        paced = {v.directory_url: v for v in await self.store.run(self.store.acme_validations.of_hostname, apex)}
        now, limits = self.clock.now(), await self._limits()
        return {ca.directory_url: failures.held(paced.get(ca.directory_url), now=now, person=not BACKGROUND.get(),
                                                records=records, limits=limits) for ca in self.cas}

    async def _hold(self, apex: str, records: str | None) -> failures.Held | None:
        """Why no CA may be asked for ``apex`` now, if none may (the soonest to let an order go)."""
        holds = list((await self._holds(apex, records)).values())
        if not holds or None in holds:
            return None
        return min((h for h in holds if h is not None), key=lambda h: h.until or dt.datetime.max.replace(tzinfo=dt.UTC))

    async def _limits(self) -> failures.Limits:
        return failures.Limits(per_hour=self.config.failed_validations_per_hour,
                               stop_after=self.config.stop_after_failed_validations,
                               negative_ttl=await self._negative_ttl())

    async def _negative_ttl(self) -> int:
        """How long a resolver keeps the delegation zone's "no such name": the built-in server's SOA
        says 60 s; an operator's zone's SOA is read once through the resolver."""
        if self._negative is None:
            found = await zone_negative_ttl(self.dns, self.zone)
            if found is None:
                return UNKNOWN_NEGATIVE_TTL
            self._negative = found
        return self._negative

    async def _renewal_window(self, certificate: AcmeCertificate) -> AcmeCertificate:
        if certificate.chain_pem is None:
            return certificate
        return await renewal.window(self.orders, self._ca(certificate.directory_url), certificate)

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
        held = await self._hold(certificate.apex, None) if certificate.order_url is None and \
            certificate.status == "invalid" else None
        return reported.state(certificate, held)
