"""Rate limits on PostgreSQL (core/ratelimit.py): every process counts in one table, ahead in
leases. Two or three RateLimiters on Stores of one database stand for as many service processes."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator

import pytest

from core.config import RateLimitsConfig
from core.ratelimit import LEASE_SHARE, Decision, RateLimiter
from store import Store
from tests.fakes import FakeClock

CLIENT = "192.0.2.1"


@pytest.fixture
def stores(pg_database: str) -> Iterator[list[Store]]:
    opened = [Store(url=pg_database) for _ in range(3)]
    yield opened
    for store in opened:
        store.close()


def limiters(stores: list[Store], clock: FakeClock, **quotas: int) -> list[RateLimiter]:
    return [RateLimiter(RateLimitsConfig(window_seconds=60, **quotas), clock, store) for store in stores]


def admit(limiter: RateLimiter, path: str = "/v1/domains/query") -> Decision:
    decision = asyncio.run(limiter.admit(path, CLIENT))
    assert decision is not None
    return decision


def counted_units(limiter: RateLimiter) -> list[str]:
    """The units of work the limiter runs from now on (the real store runs them)."""
    ran: list[str] = []
    store = limiter.store
    assert store is not None
    run = store.run

    async def counted(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        ran.append(fn.__name__)
        return await run(fn, *args, **kwargs)

    store.run = counted  # type: ignore[method-assign]
    return ran


def test_alternating_between_two_processes_admits_exactly_the_quota(stores):
    a, b, _ = limiters(stores, FakeClock(), api=10)
    answers = [admit((a, b)[n % 2]).exceeded is None for n in range(12)]
    assert answers == [True] * 10 + [False, False]


def test_no_process_admits_beyond_the_quota_in_any_order(stores):
    processes = limiters(stores, FakeClock(), api=200)
    rng = random.Random(7)
    admitted = sum(admit(rng.choice(processes)).exceeded is None for _ in range(400))
    # At most the quota; at least the quota less one unused lease per process (the largest lease
    # takes 1/LEASE_SHARE of what was left).
    assert 200 - 2 * (200 // LEASE_SHARE) <= admitted <= 200


def test_a_busy_client_is_counted_in_leases_not_one_statement_a_request(stores):
    [limiter] = limiters(stores[:1], FakeClock(), api=1_000_000)
    units = counted_units(limiter)
    decisions = [admit(limiter) for _ in range(1_000)]
    assert all(d.exceeded is None for d in decisions)
    assert 10 <= len(units) <= 25  # leases of 1, 2, 4 ... 64, then 64 at a time


def test_concurrent_requests_wait_for_one_lease_rather_than_each_taking_one(stores):
    [limiter] = limiters(stores[:1], FakeClock(), api=600)
    units = counted_units(limiter)

    async def burst() -> list[Decision | None]:
        return await asyncio.gather(*(limiter.admit("/v1/domains/query", CLIENT) for _ in range(40)))

    decisions = asyncio.run(burst())
    assert all(d is not None and d.exceeded is None for d in decisions)
    assert len(units) <= 6  # leases of 1, 2, 4, 8, 16, 32 cover 40: one at a time
    counted = stores[0].sql.execute("SELECT n FROM rate_windows").fetchone()[0]  # type: ignore[union-attr]
    assert counted <= 63


def test_a_lease_cut_short_by_another_process_still_reports_what_it_leaves(stores):
    [limiter] = limiters(stores[:1], FakeClock(), api=600)
    for _ in range(127):  # leases of 1 ... 64, all used
        admit(limiter)
    stores[1].sql.execute("UPDATE rate_windows SET n = 590")  # the other processes took most of the rest
    decisions = [admit(limiter) for _ in range(11)]
    assert [d.usages[0].remaining for d in decisions[:10]] == list(range(9, -1, -1))
    assert decisions[10].exceeded is not None


def test_a_full_bucket_refuses_without_a_query(stores):
    [limiter] = limiters(stores[:1], FakeClock(), api=3)
    for _ in range(4):
        admit(limiter)
    units = counted_units(limiter)
    refused = admit(limiter)
    assert (refused.exceeded.bucket, refused.exceeded.remaining, units) == ("api", 0, [])  # type: ignore[union-attr]


def test_remaining_counts_down_as_requests_are_admitted(stores):
    [limiter] = limiters(stores[:1], FakeClock(), api=100)
    assert [admit(limiter).usages[0].remaining for _ in range(3)] == [99, 98, 97]


def test_a_request_refused_by_the_shared_bucket_is_not_counted_in_the_inner_one(stores):
    a, b, _ = limiters(stores, FakeClock(), api=1, auth=5)
    admit(a)
    decision = admit(b, "/v1/auth/session")
    assert decision.exceeded.bucket == "api"  # type: ignore[union-attr]
    assert admit(a, "/v1/auth/session").usages[1].remaining == 5


def test_a_new_window_counts_afresh_and_the_old_windows_go(stores):
    clock = FakeClock()
    [limiter] = limiters(stores[:1], clock, api=2)
    for _ in range(3):
        admit(limiter)
    clock.advance(120)
    assert admit(limiter).exceeded is None
    rows = stores[0].sql.execute("SELECT count(*) FROM rate_windows").fetchone()[0]  # type: ignore[union-attr]
    assert rows == 1
