"""One-click DNS set-up (Domain Connect, synchronous flow): starting it, and the customer's return.

A start makes a fresh apply URL, signed under the operator's key, carrying only the zone, the
host, the two records' variables, the return address and a one-use ``state``. It is made when
someone who may act for the domain asks (a member on the DNS page, the holder of a verification
link, an API client with a verify scope), never stored and never e-mailed, and each start is
logged with who asked.

Why so careful (docs/one-click.md): anyone may add someone else's hostname to their
own workspace, so a validly signed URL can be sent to the real owner as a phishing link; their DNS
host would then show our operator's name on its consent screen. The signature only stops third
parties from changing the values. The mitigations kept here: a short-lived, one-use state bound to
one domain; nothing but the records' variables in the URL; the TXT value's fixed prefix in the
template; and success decided by our own DNS check, never by the return (anyone can type that URL).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import secrets
import uuid
from typing import TYPE_CHECKING

import attrs

from core.domain_connect import template
from core.domains.dns_host_view import needs_records
from core.domains.operations import load
from core.errors import Conflict, NotFound
from core.verification import checks, dns_host, links
from core.wire import INTERNAL
from store.records import DomainRow, OneClickStart, Workspace

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)
#: How long a start's state is accepted back: long enough to sign in at the DNS host and approve.
STATE_LIFETIME = dt.timedelta(minutes=30)
RETURN_PATH = "/connect/done"


@attrs.frozen
class OneClickUrl:
    url: str
    """Send the customer's browser here: their DNS host's consent page. Its ``state`` works once, but
    DNS hosts do not check it: the signed URL itself stays valid until the key is rotated, so treat it
    as a capability (hand it only to whoever controls the hostname)."""
    expires_at: dt.datetime
    "Coming back after this, the set-up still happened if approved, but this service is not told which domain."
    provider_name: str
    "The DNS host, in its own words."
    state: str = attrs.field(metadata={INTERNAL: True})
    "Also kept in the starting browser: Cloudflare does not send it back (docs/one-click.md)."


@attrs.frozen
class Return:
    """What the customer's return from their DNS host led to."""

    outcome: str
    "``checked`` (our DNS check ran), ``no_state`` (none came back) or ``unusable_state`` (not one of ours, used before or expired)."
    domain: DomainRow | None = None
    result: checks.VerifyResult | None = None
    host_said: str | None = None
    "The DNS host's own error (``access_denied``...): a hint, given only by the browser that started the set-up."


def unavailable_reason(services: Services, row: DomainRow) -> str | None:
    """Why one-click set-up is not offered for this domain now; None when it is."""
    if services.domain_connect is None:
        return "One-click set-up is not configured on this service ([domain_connect] provider_id)."
    if not needs_records(row):
        return "Both DNS records are already in place."
    if row.dns_host is None:
        return "The domain's DNS host is not known yet: its zone could not be found in DNS."
    if row.dns_host.offer is None and row.dns_host.offer_unknown:
        return (f"Whether the DNS host of {row.dns_host.zone} offers one-click set-up could not be checked just now; "
                "try again in a minute, or publish the two records by hand.")
    if row.dns_host.offer is None:
        return (f"The DNS host of {row.dns_host.zone} does not offer one-click set-up for this service; "
                "publish the two records by hand.")
    return None


async def start(services: Services, *, workspace: Workspace, domain_id: uuid.UUID, started_by: str) -> OneClickUrl:
    """A fresh signed apply URL for the domain; 409 ``one_click_unavailable`` when none can be offered."""
    row = await dns_host.freshened(services, await services.store.run(load, services, workspace, domain_id))
    why = unavailable_reason(services, row)
    if why is not None:
        raise Conflict("one_click_unavailable", why)
    assert row.dns_host is not None and row.dns_host.offer is not None
    assert services.domain_connect is not None and services.domain_connect_key is not None
    # The discovery's own: the operator's registration, or the simulation's ([domain_connect] simulate).
    offer, config = row.dns_host.offer, services.domain_connect.config
    state = secrets.token_urlsafe(32)
    now = services.clock.now()
    expires_at = now + STATE_LIFETIME
    await services.store.run(_insert, services, workspace, OneClickStart(
        state_hash=_hash(state), workspace_id=workspace.id, domain_id=row.id, created_at=now,
        expires_at=expires_at, started_by=started_by))
    domain, host = template.split(row.apex, row.dns_host.zone)
    params = {"domain": domain, "host": host, "redirect_uri": return_url(services), "state": state,
              **template.variables(row.delegation_target, row.ownership_token)}
    # Here, not above: the signing's cryptography was imported by every start-up, with one-click set-up off (issue 49).
    from core.domain_connect import signing

    url = signing.apply_url(url_sync_ux=offer.url_sync_ux, provider_id=config.provider_id,
                            service_id=config.service_id, params=params, key=services.domain_connect_key,
                            key_label=config.key_label)
    log.info("one-click set-up of %s started by %s at %s (%s)", row.apex, started_by, offer.provider_name,
             offer.url_sync_ux)
    return OneClickUrl(url=url, expires_at=expires_at, provider_name=offer.provider_name, state=state)


def _insert(services: Services, workspace: Workspace, started: OneClickStart) -> None:
    with services.store.transaction():
        load(services, workspace, started.domain_id)  # deleted meanwhile: 404, not a dangling start
        services.store.one_click.insert(started)


async def link_domain(services: Services, token: str) -> DomainRow:
    """The domain of a verification link (404/410 as the link's page), its DNS host looked up when needed."""
    _, _, row = await links.holder(services, token)
    return await dns_host.freshened(services, row)


async def start_for_link(services: Services, token: str) -> OneClickUrl:
    """A start by the holder of a verification link: the link's domain only."""
    link, workspace, _ = await links.holder(services, token)
    return await start(services, workspace=workspace, domain_id=link.domain_id, started_by=f"link:{link.id}")


async def finish(services: Services, *, state: str | None, error: str | None) -> Return:
    """The return from the DNS host: the state works once, then our own DNS check decides."""
    host_said = error[:100] if error else None
    if not state:
        return Return("no_state", host_said=host_said)
    if len(state) > 100:  # none of ours
        return Return("unusable_state", host_said=host_said)
    workspace, row = await services.store.run(_use, services, _hash(state))
    if workspace is None or row is None:  # not one of ours, used before, expired, or deleted meanwhile
        return Return("unusable_state", host_said=host_said)
    log.info("one-click set-up of %s: back from the DNS host (error: %r)", row.apex, host_said)
    try:
        result = await checks.verify(services, workspace=workspace, domain_id=row.id)
    except NotFound:  # deleted during the check
        return Return("unusable_state", host_said=host_said)
    checked = await services.store.run(services.store.domains.get, workspace.id, row.id) or row  # or deleted a moment ago
    return Return("checked", domain=checked, result=result, host_said=host_said)


def _use(services: Services, state_hash: str) -> tuple[Workspace | None, DomainRow | None]:
    """The state used up, and the workspace and domain it was started for (None, None: unusable)."""
    with services.store.transaction():
        used = services.store.one_click.use(state_hash, services.clock.now())
    if used is None:
        return None, None
    return services.store.accounts.get_workspace(used.workspace_id), services.store.domains.get(used.workspace_id, used.domain_id)


def purge(services: Services) -> int:
    """Forget expired states: a return with one is told it cannot be used either way. A unit of work."""
    with services.store.transaction():
        return services.store.one_click.purge(expired_before=services.clock.now())


def return_url(services: Services) -> str:
    return services.config.server.portal_url.rstrip("/") + RETURN_PATH


def _hash(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()
