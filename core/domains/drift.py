"""Drift: what a check of a verified domain finds wrong with the DNS its renewals depend on.

A verified domain stays verified (ownership was proven once); its delegation CNAME must stay in
place for every renewal, and its CAA records must keep allowing the provider's certificate
authorities. A check that finds otherwise records the problem on the domain, with its fix, until a
later check finds it gone; meanwhile ``opsStatus`` is ``action_needed``. A CNAME published again
that a resolver's cache still hides is recorded too, but ``waiting``: nothing to change, and
``opsStatus`` is ``pending`` while nothing else is wrong. Each source of checks replaces only its
own codes: a DNS check of the CNAME, the CAA pre-flight.

With ``[lifecycle] events = "transitions"`` operators also hear of it: ``domain.drift_detected``
when drift is first recorded on a domain, ``domain.drift_cleared`` when the last of it is gone,
each written to the outbox in the transaction that stores the change (``announce``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING

import attrs

from core.domains.records import ops_status
from store.records import DomainRow, DriftProblem, OutboxEvent

if TYPE_CHECKING:
    from core.services import Services

DELEGATION = ("delegation_missing", "delegation_wrong", "dnssec_failure", "lame_delegation")
CAA = ("caa_forbids",)
DETECTED = "domain.drift_detected"
CLEARED = "domain.drift_cleared"
EVENT_TYPES = (DETECTED, CLEARED)


def needs_action(drift: tuple[DriftProblem, ...]) -> bool:
    """Some problem asks for a change (not only for a resolver's cache to expire)."""
    return any(not p.waiting for p in drift)


def only_waiting(drift: tuple[DriftProblem, ...]) -> bool:
    """Every problem is fixed at the zone, a resolver's cache still hiding it: only time is needed."""
    return bool(drift) and not needs_action(drift)


def drift_ops_status(validation_status: str, cert_status: str, drift: tuple[DriftProblem, ...]) -> str:
    """``opsStatus`` of a domain with this drift (none, some to act on, or only waiting on a cache)."""
    return ops_status(validation_status, cert_status, drifted=needs_action(drift), waiting=only_waiting(drift))


def with_drift(row: DomainRow, found: list[DriftProblem], *, replacing: tuple[str, ...], now: dt.datetime) -> DomainRow:
    """``row`` with the problems of one source of checks replaced by what it ``found`` now."""
    drift = tuple(p for p in row.drift if p.code not in replacing) + tuple(found)
    return attrs.evolve(
        row, drift=drift, drift_since=(row.drift_since or now) if drift else None,
        ops_status=drift_ops_status(row.validation_status, row.cert_status, drift),
    )


def announce(services: Services, before: DomainRow, after: DomainRow) -> None:
    """Queue the event of a change from no drift to some (or back) between ``before`` and
    ``after``; call inside the transaction that stores ``after``.

    Only in ``"transitions"`` mode: the spec emits its three certificate events and no other. One
    problem replaced by another, or a second check finding the same, is no transition: the
    Domain's ``validation.drift`` shows it, and a receiver hears once, not at every check.
    """
    if services.config.lifecycle.events != "transitions" or bool(before.drift) == bool(after.drift):
        return
    services.store.outbox.insert(OutboxEvent(
        id=uuid.uuid4(),
        workspace_id=after.workspace_id,
        type=DETECTED if after.drift else CLEARED,
        data={"domainId": str(after.id), "apex": after.apex,
              "drift": [{"code": p.code, "message": p.message, "fix": p.fix} for p in after.drift]},
        created_at=services.clock.now(),
    ))
