"""What the ACME provider does on its own, now and then (core/runtime/jobs.py runs it):

- **Certificates of deleted domains are revoked.** Deleting a domain marks the ACME certificates
  its Certificate records name (store/acme.py ``mark_deleted``, in the deletion's transaction):
  they are served no more at once, and revoked at their CA (reason ``cessationOfOperation``) and
  forgotten, with their keys, at the job's next run, every ``REVOKE_SECONDS``. A certificate no
  record names and no deletion marked (an order stored before its record, whose record was never
  stored) is revoked too once ``GRACE`` has passed since its creation. For an edge provider's
  certificate the spec says deleting a domain revokes nothing (the provider holds it); here the
  service holds the key of a certificate still valid for a hostname it no longer serves, and
  revoking it is the safe end.
- **Domains added under another provider are pointed at the delegation zone.** Moving a deployment
  from Cloudflare or the sandbox to ACME changes every domain's CNAME target: the stored target is
  rewritten, so the API and the DNS page show the new one; a verified domain's next check then
  finds its CNAME pointing elsewhere and records drift with the fix, and its next certificate is
  ordered once the customer has changed the CNAME.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

import attrs

from core.acme.cas import CaDown, CaRefused

if TYPE_CHECKING:
    from core.acme.provider import AcmeProvider
    from store import Store

log = logging.getLogger(__name__)

#: A certificate no record names, and no deletion marked, is left alone this long: a new order is
#: stored before its record.
GRACE = dt.timedelta(minutes=10)
#: How often the job runs (core/runtime/jobs.py): a deleted domain's certificate is revoked within it.
REVOKE_SECONDS = 15.0
#: Certificates no record names are looked for at every this many runs (a scan of them all).
ORPHANS_EVERY = 4
#: RFC 5280 reason code: the hostname is no longer served.
CESSATION_OF_OPERATION = 5
#: Domains pointed at the delegation zone per unit of work.
BATCH = 500


async def revoke_deleted(provider: AcmeProvider, *, orphans: bool = True) -> int:
    """Revoke and forget the certificates of deleted domains, and (``orphans``) those no record
    names since ``GRACE``; how many were forgotten."""
    store, now = provider.store, provider.clock.now()
    forgotten = 0
    found = await store.run(store.acme.deleted)
    if orphans:
        found += await store.run(store.acme.unreferenced, now - GRACE)
    for certificate in found:
        if certificate.chain_pem is not None and certificate.not_after is not None and certificate.not_after > now:
            ca = next((ca for ca in provider.cas if ca.directory_url == certificate.directory_url), None)
            try:
                if ca is None:
                    raise CaRefused(f"{certificate.directory_url} is no longer configured")
                await ca.ready(store, provider.keyring, provider.clock)
                await ca.call(ca.client.revoke, certificate.chain_pem, reason=CESSATION_OF_OPERATION)
                log.info("revoked the certificate of deleted domain %s at %s", certificate.apex, certificate.directory_url)
            except CaDown as down:
                log.warning("revoking the certificate of deleted domain %s: %s; trying again later", certificate.apex, down)
                continue
            except CaRefused as refused:  # already revoked, or another account's: nothing more to do
                log.warning("the certificate of deleted domain %s was not revoked: %s", certificate.apex, refused)
        await store.run(_forget, store, certificate.handle)
        forgotten += 1
    return forgotten


def _forget(store: Store, handle: str) -> None:
    with store.transaction():
        store.acme.delete(handle)


async def point_at_zone(provider: AcmeProvider) -> int:
    """Rewrite the CNAME target of domains added under another provider; how many were."""
    store = provider.store
    moved = 0
    while True:
        batch = await store.run(_retarget, provider)
        moved += batch
        if batch < BATCH:
            return moved


def _retarget(provider: AcmeProvider) -> int:
    store, now = provider.store, provider.clock.now()
    with store.transaction():
        rows = store.domains.targeting_elsewhere(provider.zone, BATCH)
        for row in rows:
            store.domains.update(attrs.evolve(row, delegation_target=provider.target(row.apex), updated_at=now))
    if rows:
        log.info("%d domains now point their CNAME into %s", len(rows), provider.zone)
    return len(rows)
