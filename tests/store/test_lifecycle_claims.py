"""store.lifecycle: a due check is claimed by one process at a time, and a lease that runs out
makes it due again (two Store objects on one database stand for two service processes), on both
backends. A claim is a unit of work (``store.run``) in a transaction ordered by its row locks
(``row_locked=True``), as store/lifecycle.py asks."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid

import pytest

from store import Store
from store.records import DomainRow, Workspace
from tests.store.conftest import drain_from_two_processes

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
LEASE = NOW + dt.timedelta(minutes=5)


@pytest.fixture
def open_seeded(open_store):
    """Opens Stores on one database that holds 1,000 domains, due over seven seconds."""
    store = open_store()
    ws = Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")
    with store.transaction():
        store.accounts.insert_workspace(ws)
        store.domains.insert_many([
            DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=f"h{n}.example.com", tags=[], created_at=NOW,
                      updated_at=NOW, delegation_target="t", validation_status="pending", cert_status="none",
                      ops_status="action_needed", ownership_token="t", next_check_at=NOW + dt.timedelta(seconds=n % 7),
                      checks_since=NOW)
            for n in range(1000)
        ])
    return open_store


def claim(store: Store, now: dt.datetime, limit: int = 50) -> list[uuid.UUID]:
    def unit() -> list[uuid.UUID]:
        with store.transaction(row_locked=True):
            return [d for _, d in store.lifecycle.claim(now, LEASE, limit)]

    return asyncio.run(store.run(unit))


def test_two_processes_never_claim_the_same_check(open_seeded):
    stores = [open_seeded(), open_seeded()]
    both = drain_from_two_processes(stores, lambda s: claim(s, NOW + dt.timedelta(seconds=10)))
    assert len(both) == len(set(both)) == 1000


def test_only_what_is_due_is_claimed_soonest_first(open_seeded):
    store = open_seeded()
    first = claim(store, NOW, limit=1000)
    assert len(first) == len([n for n in range(1000) if n % 7 == 0])


def test_a_claimed_check_is_due_again_when_its_lease_runs_out(open_seeded):
    store = open_seeded()
    claimed = claim(store, NOW + dt.timedelta(seconds=10), limit=1000)
    assert claim(store, NOW + dt.timedelta(minutes=4)) == []
    assert sorted(claim(store, LEASE, limit=1000)) == sorted(claimed)
