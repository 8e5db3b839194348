"""When an issued certificate is renewed: a moment in the renewal window its CA suggests (ACME
Renewal Information, RFC 9773), read again when the CA's ``Retry-After`` says (six hours without
one), or, from a CA without ARI, two thirds into the certificate's life (core/lifetimes.py).

The moment is spread uniformly over the window across certificates (RFC 9773 section 4.2) and is
the same at every reading of one certificate's window, so a window read again does not move a
renewal that is due; a window the CA moved into the past (a mass revocation ahead) makes the
renewal due at once. The CA's ``explanationURL`` is kept with the certificate: the API's messages
and the diagnosis show it, and the log says when a window comes with one.
"""

from __future__ import annotations

import hashlib
import logging

import attrs

from core import lifetimes
from core.acme.cas import Ca, CaDown, CaRefused
from core.acme.client import ARI_EVERY
from core.acme.orders import Orders
from store.acme import AcmeCertificate

log = logging.getLogger(__name__)


async def window(orders: Orders, ca: Ca, certificate: AcmeCertificate) -> AcmeCertificate:
    """``certificate`` with its renewal time, the CA's window read if it is time to; stored."""
    assert certificate.chain_pem is not None
    now = orders.clock.now()
    due = certificate.ari_next_at or (certificate.ari_checked_at + ARI_EVERY if certificate.ari_checked_at else None)
    if due is not None and now < due:
        return certificate
    try:
        suggested = await ca.call(ca.client.renewal_window, certificate.chain_pem)
    except (CaDown, CaRefused) as exc:
        log.info("renewal window of %s not read: %s", certificate.apex, exc)
        suggested = None
    if suggested is not None:
        renew_at = suggested.start + (suggested.end - suggested.start) * place(certificate.chain_pem)
        if suggested.explanation_url:
            log.warning("the certificate authority %s suggests renewing %s from %s to %s (renewal at %s); it "
                        "explains why at %s", ca.directory_url, certificate.apex, suggested.start, suggested.end,
                        renew_at, suggested.explanation_url)
    else:
        assert certificate.not_before is not None and certificate.not_after is not None
        renew_at = lifetimes.last_third_starts(certificate.not_before, certificate.not_after)
    return await orders.save(attrs.evolve(
        certificate, renew_at=renew_at, ari_checked_at=now,
        ari_next_at=now + (suggested.retry_after if suggested is not None else ARI_EVERY),
        ari_explanation_url=suggested.explanation_url if suggested is not None else None))


def place(chain_pem: str) -> float:
    """Where in its window a certificate renews, 0 to 1: random across certificates, the same at each
    reading of one certificate's window."""
    return int.from_bytes(hashlib.sha256(chain_pem.encode()).digest()[:8], "big") / 2**64
