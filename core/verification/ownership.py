"""A verified domain's ownership, read again at every check (issue 46).

The delegation CNAME's target is the same in every workspace, so only the ownership TXT tells which
workspace owns a hostname now. Once verified, the TXT may go (customers remove it, and nothing asks
them to keep it): a missing TXT, or one holding other values only, changes nothing. A TXT holding
another workspace's token and not ours means ownership was proven elsewhere since (the customer
moved the hostname): the domain leaves ``verified`` as a failed verification ends (``error``, the
other token named), its drift is cleared, and its certificate is renewed no more (core/acme/). A
TXT lookup that fails is inconclusive: said, and nothing changes.

A change into or out of ``verified`` changes which workspace's certificate a TLS terminator is
handed for the hostname (store/acme.py ``all_served``): the domain's certificates are touched, so
the terminator's index reads them again. A domain that becomes verified also has the other
workspaces' verified domains for its hostname checked at the next background sweep, not at their
daily check: their TXT holds this workspace's token now.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import attrs

from store.records import DomainRow, Workspace

if TYPE_CHECKING:
    from core.services import Services
    from core.verification.answers import RecordCheck


def said(check: RecordCheck) -> list[RecordCheck]:
    """What a verified domain's TXT check adds to its CNAME's: the TXT when it holds another
    workspace's token (the domain leaves ``verified``) or its lookup failed (inconclusive)."""
    return [check] if check.other_token is not None or check.state == "unknown" else []


def moved(checks: list[RecordCheck]) -> bool:
    """Whether a verified domain's checks found its TXT holding another workspace's token."""
    return any(c.other_token is not None for c in checks)


def changed(services: Services, workspace: Workspace, before: DomainRow, after: DomainRow, now: dt.datetime) -> DomainRow:
    """``after`` (the check's outcome, about to be stored) with what a change into or out of
    ``verified`` also does; call inside the transaction that stores it."""
    if after.validation_status == before.validation_status or "verified" not in (after.validation_status,
                                                                                 before.validation_status):
        return after
    services.store.acme.touch_domain(workspace.id, after.id, now)
    if after.validation_status != "verified":
        return after
    services.store.domains.check_others_now(after.apex, workspace.id, now)
    return attrs.evolve(after, verified_at=now)
