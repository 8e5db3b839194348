"""Idempotency-Key records: claims, leases after a crash, and the purge."""

from __future__ import annotations

import datetime as dt

import pytest

from core.certificates import idempotency as idem
from core.errors import Conflict


def key(body=None, name="k"):
    return idem.IdempotencyKey(method="POST", path="/v1/domains/x/issue", key=name, fingerprint=idem.fingerprint(body or {}))


class TestClaims:
    """begin() and its outcomes."""

    def test_the_first_request_claims_the_key(self, services, world):
        owner = world.owner()
        assert isinstance(idem.begin(services, workspace_id=owner.workspace.id, key=key()), idem.Claim)

    def test_a_claim_held_by_a_live_request_is_in_progress(self, services, world):
        owner = world.owner()
        idem.begin(services, workspace_id=owner.workspace.id, key=key())
        with pytest.raises(Conflict) as caught:
            idem.begin(services, workspace_id=owner.workspace.id, key=key())
        assert caught.value.code == "idempotency_in_progress"

    def test_a_claim_left_by_a_crash_is_taken_over_after_its_lease(self, services, world, clock):
        owner = world.owner()
        idem.begin(services, workspace_id=owner.workspace.id, key=key())  # the process dies here
        clock.advance(idem.LEASE.total_seconds())
        assert isinstance(idem.begin(services, workspace_id=owner.workspace.id, key=key()), idem.Claim)

    def test_a_completed_request_replays(self, services, world):
        owner = world.owner()
        claim = idem.begin(services, workspace_id=owner.workspace.id, key=key())
        with services.store.transaction():
            idem.complete(services, claim, status_code=200, body='{"a":1}')
        assert idem.begin(services, workspace_id=owner.workspace.id, key=key()) == idem.Replay(200, '{"a":1}')

    def test_a_released_claim_runs_again(self, services, world):
        owner = world.owner()
        idem.release(services, idem.begin(services, workspace_id=owner.workspace.id, key=key()))
        assert isinstance(idem.begin(services, workspace_id=owner.workspace.id, key=key()), idem.Claim)

    def test_reuse_with_another_body_is_named_before_in_progress(self, services, world):
        owner = world.owner()
        idem.begin(services, workspace_id=owner.workspace.id, key=key())
        with pytest.raises(Conflict) as caught:
            idem.begin(services, workspace_id=owner.workspace.id, key=key({"ca": "x"}))
        assert caught.value.code == "idempotency_key_reused"

    def test_the_fingerprint_ignores_key_order(self):
        assert idem.fingerprint({"a": 1, "b": 2}) == idem.fingerprint({"b": 2, "a": 1})


class TestPurge:
    """Records are kept at least 24 hours."""

    def test_records_younger_than_a_day_are_kept(self, services, world, clock):
        owner = world.owner()
        idem.begin(services, workspace_id=owner.workspace.id, key=key())
        clock.advance(idem.RETENTION.total_seconds() - 1)
        assert idem.purge(services) == 0

    def test_older_records_are_purged(self, services, world, clock):
        owner = world.owner()
        idem.begin(services, workspace_id=owner.workspace.id, key=key())
        clock.advance(idem.RETENTION.total_seconds() + 1)
        assert idem.purge(services) == 1
        assert isinstance(idem.begin(services, workspace_id=owner.workspace.id, key=key({"new": True})), idem.Claim)

    def test_the_retention_is_at_least_24_hours(self):
        assert idem.RETENTION >= dt.timedelta(hours=24)
