"""What the ACME provider reports (core/acme/provider.py), in the words the rest of the service
reads: a certificate's state as core/certificates/states.py takes it, and why our own pacing took
no order."""

from __future__ import annotations

from core.acme import keys
from core.acme.failures import Held
from core.edge import ProviderBusy, ProviderState, ShareSpent
from core.edge.words import ca_name
from store.acme import AcmeCertificate


def state(certificate: AcmeCertificate, held: Held | None) -> ProviderState:
    """``held``: why no new order may go now, for a certificate whose last order was refused."""
    if certificate.order_url is not None:
        ssl = "pending_validation"
    elif certificate.status == "invalid":
        ssl = "invalid"
    else:
        ssl = "active"
    issued = certificate.chain_pem is not None
    errors: tuple[str, ...] = (certificate.error,) if certificate.error else ()
    errors += (held.why,) if held is not None else ()
    explained = certificate.ari_explanation_url
    return ProviderState(
        hostname_id=certificate.handle,
        hostname_status="active" if issued else "pending",
        ssl_status=ssl,
        certificate_id=keys.ari_id(certificate.chain_pem) if certificate.chain_pem else None,
        # Before anything is issued (an order under way, or refused) the CA it was ordered from.
        issuer=keys.issuer_name(certificate.chain_pem) if certificate.chain_pem else ca_name(certificate.directory_url),
        issued_at=certificate.not_before,
        expires_at=certificate.not_after,
        errors=errors,
        renew_at=certificate.renew_at,
        profile=certificate.profile if issued else None,
        notice=f"The certificate authority explains the renewal window it suggests for this certificate: "
               f"{explained}" if explained and issued else None,
    )


def busy(exc: ProviderBusy) -> str:
    """Why our pacing of a CA's orders took none now: its budget, or this workspace's part of it."""
    if not isinstance(exc, ShareSpent):
        return "the service's order budget for it is spent"
    if exc.common:
        return ("the part of the service's order budget for it that workspaces share beyond what their verified, "
                "active hostnames earn is spent for now")
    return ("this workspace has used its share of the service's order budget for it, a share that grows with its "
            "verified, active hostnames")

