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


def claim(store: Store, now: dt.datetime, limit: int = 50, **turns) -> list[uuid.UUID]:
    return [d for _, d in claim_pairs(store, now, limit, **turns)]


def claim_pairs(store: Store, now: dt.datetime, limit: int, **turns) -> list[tuple[uuid.UUID, uuid.UUID]]:
    def unit() -> list[tuple[uuid.UUID, uuid.UUID]]:
        with store.transaction(row_locked=True):
            return store.lifecycle.claim(now, LEASE, limit, **turns)

    return asyncio.run(store.run(unit))


def workspace_with(store: Store, due: list[dt.datetime], name: str, *, requested: list[dt.datetime] = ()) -> Workspace:
    """A workspace whose domains are due at ``due``, one each, verifying their DNS; and those with a
    certificate requested (pending), due at ``requested``."""
    ws = Workspace(id=uuid.uuid4(), name=name, created_at=NOW, ownership_token=name)
    with store.transaction():
        store.accounts.insert_workspace(ws)
        store.domains.insert_many([
            DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=f"{kind}{n}.{name}.com", tags=[], created_at=NOW,
                      updated_at=NOW, delegation_target="t", validation_status=validation, cert_status=cert,
                      ops_status="action_needed", ownership_token=name, next_check_at=at, checks_since=NOW)
            for kind, validation, cert, times in (("h", "pending", "none", due), ("r", "verified", "pending", requested))
            for n, at in enumerate(times)
        ])
    return ws


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


class TestWorkspacesTakeTurns:
    """Issue 38, item 2: a workspace's backlog never delays another's checks past one turn."""

    def test_a_workspace_with_one_check_due_gets_a_turn_before_another_backlog(self, open_store):
        store = open_store()
        noisy = workspace_with(store, [NOW - dt.timedelta(seconds=n) for n in range(100, 200)], "noisy")
        quiet = workspace_with(store, [NOW], "quiet")
        claimed = claim_pairs(store, NOW, 4)
        assert [w for w, _ in claimed].count(quiet.id) == 1 and [w for w, _ in claimed].count(noisy.id) == 3

    def test_each_workspace_gives_its_longest_due_check_first(self, open_store):
        store = open_store()
        ws = workspace_with(store, [NOW - dt.timedelta(seconds=n) for n in (5, 50, 20)], "order")
        [(_, first)] = claim_pairs(store, NOW, 1)
        assert store.domains.get(ws.id, first).apex == "h1.order.com"

    def test_a_workspace_running_its_cap_of_checks_is_passed_over(self, open_store):
        store = open_store()
        noisy = workspace_with(store, [NOW - dt.timedelta(seconds=n) for n in range(10)], "noisy")
        quiet = workspace_with(store, [NOW], "quiet")
        assert {w for w, _ in claim_pairs(store, NOW, 10, cap=2, running={noisy.id: 2})} == {quiet.id}

    def test_a_workspace_gets_no_more_than_its_cap_less_what_it_runs(self, open_store):
        store = open_store()
        noisy = workspace_with(store, [NOW - dt.timedelta(seconds=n) for n in range(10)], "noisy")
        assert len(claim_pairs(store, NOW, 10, cap=5, running={noisy.id: 2})) == 3

    def test_turns_begin_after_the_workspace_claimed_last(self, open_store):
        store = open_store()
        names = [workspace_with(store, [NOW, NOW], name) for name in ("a", "b", "c")]
        first, second, third = sorted(names, key=lambda ws: str(ws.id))
        assert [w for w, _ in claim_pairs(store, NOW, 2, after=first.id)] == [second.id, third.id]
        assert [w for w, _ in claim_pairs(store, NOW, 1, after=third.id)] == [first.id]


class TestRequestedCertificatesFirst:
    """Issue 41, item 3: a certificate already requested is read back before newer domains are
    verified, so the first customers of an import do not wait for the last."""

    def test_a_requested_certificate_is_refreshed_before_longer_due_verifications(self, open_store):
        store = open_store()
        ws = workspace_with(store, [NOW - dt.timedelta(seconds=n) for n in range(10, 20)], "import", requested=[NOW])
        [(_, first)] = claim_pairs(store, NOW, 1, cap=8)
        assert store.domains.get(ws.id, first).apex == "r0.import.com"

    def test_refreshes_go_first_in_all_but_one_of_a_workspaces_checks(self, open_store):
        store = open_store()
        late = [NOW - dt.timedelta(seconds=n) for n in range(10)]
        ws = workspace_with(store, [NOW - dt.timedelta(seconds=n) for n in range(100, 110)], "import", requested=late)
        apexes = [store.domains.get(ws.id, d).apex[0] for _, d in claim_pairs(store, NOW, 8, cap=8)]
        assert sorted(apexes) == ["h"] + ["r"] * 7

    def test_a_verification_keeps_one_check_while_refreshes_run(self, open_store):
        store = open_store()
        late = [NOW - dt.timedelta(seconds=n) for n in range(10)]
        ws = workspace_with(store, [NOW - dt.timedelta(seconds=n) for n in range(100, 110)], "import", requested=late)
        claimed = claim_pairs(store, NOW, 1, cap=8, running={ws.id: 7}, refreshing={ws.id: 7})
        assert [store.domains.get(ws.id, d).apex[0] for _, d in claimed] == ["h"]
