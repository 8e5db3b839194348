"""Drift: what a check of a verified domain finds wrong with the DNS its renewals depend on.

A verified domain stays verified (ownership was proven once); its delegation CNAME must stay in
place for every renewal, and its CAA records must keep allowing the provider's certificate
authorities. A check that finds otherwise records the problem on the domain, with its fix, until a
later check finds it gone; meanwhile ``opsStatus`` is ``action_needed``. Each source of checks
replaces only its own codes: a DNS check of the CNAME, the CAA pre-flight.
"""

from __future__ import annotations

import datetime as dt

import attrs

from core.domains.records import ops_status
from store.records import DomainRow, DriftProblem

DELEGATION = ("delegation_missing", "delegation_wrong", "dnssec_failure", "lame_delegation")
CAA = ("caa_forbids",)


def with_drift(row: DomainRow, found: list[DriftProblem], *, replacing: tuple[str, ...], now: dt.datetime) -> DomainRow:
    """``row`` with the problems of one source of checks replaced by what it ``found`` now."""
    drift = tuple(p for p in row.drift if p.code not in replacing) + tuple(found)
    return attrs.evolve(
        row, drift=drift, drift_since=(row.drift_since or now) if drift else None,
        ops_status=ops_status(row.validation_status, row.cert_status, drifted=bool(drift)),
    )
