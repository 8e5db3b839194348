"""The provider's request budget on PostgreSQL (store/shared.py ``take_call``): each workspace's
share of it and the workspaces' turns hold across processes. Two Stores on one database stand for
two service processes; the clock is the ``now`` each call is given."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store import Store

WINDOW = 60.0
TURN = 0.05


@pytest.fixture
def processes(pg_database: str) -> Iterator[list[Store]]:
    opened = [Store(url=pg_database) for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def take(store: Store, workspace: str | None, now: float, *, limit: int = 4, workspace_limit: int = 2,
         background: bool = False, earned: int | None = None) -> tuple[float, str]:
    """What held the call back (``"budget"`` when it was taken, or when the budget held it), and
    how long; a workspace's share grows (``earned`` given) beyond a new workspace's 1 call, out of a
    common part of 2."""
    with store.transaction(row_locked=True):
        wait, why, _ = store.shared.take_call(
            "cloudflare:zone", now=now, window=WINDOW, limit=limit, background=background, background_limit=limit,
            workspace=workspace, workspace_limit=workspace_limit, patience=WINDOW, turn=TURN, earned=earned,
            new_workspace_limit=1, common_limit=2)
        return wait, why


def test_a_workspaces_share_holds_across_processes(processes):
    a, b = processes
    assert take(a, "w1", 1000) == (0, "budget")
    assert take(b, "w1", 1010) == (0, "budget")
    assert take(a, "w1", 1020) == (40, "share")  # its share, not the budget: its first call leaves at 1060
    assert take(b, "w2", 1020) == (0, "budget")  # the others keep the rest
    assert take(b, None, 1020) == (0, "budget")  # a call made for no workspace is in nobody's share


def test_a_freed_slot_goes_to_the_workspace_with_fewer_calls_waiting_in_another_process(processes):
    a, b = processes
    for now, workspace in ((1000, "w1"), (1001, "w1"), (1002, "w1"), (1003, "w2")):
        assert take(a, workspace, now, workspace_limit=4) == (0, "budget")
    assert take(a, "w1", 1004, workspace_limit=4) == (56, "budget")  # the budget is spent
    assert take(b, "w2", 1005, workspace_limit=4) == (55, "budget")  # w2 waits too, in process b
    assert take(a, "w1", 1060, workspace_limit=4) == (TURN, "budget")  # room, but w2 has had fewer calls
    assert take(b, "w2", 1060, workspace_limit=4) == (0, "budget")
    assert take(a, "w1", 1060 + TURN, workspace_limit=4) == pytest.approx((1001 + WINDOW - 1060 - TURN, "budget"))


def test_a_workspace_that_stopped_waiting_holds_up_no_one(processes):
    a, b = processes
    for now, workspace in ((1000, "w1"), (1001, "w1"), (1002, "w1"), (1003, "w2")):
        assert take(a, workspace, now, workspace_limit=4) == (0, "budget")
    assert take(b, "w2", 1005, workspace_limit=4) == (55, "budget")  # to look again at 1060 ...
    assert take(a, "w1", 1062, workspace_limit=4) == (0, "budget")  # ... and it did not come back


def test_workspaces_beyond_what_their_hostnames_earn_share_one_common_part_across_processes(processes):
    a, b = processes
    assert take(a, "new 1", 1000, earned=0, workspace_limit=3) == (0, "budget")
    assert take(b, "new 1", 1001, earned=0, workspace_limit=3) == (59, "share")  # a new workspace's 1 call
    assert take(b, "new 2", 1002, earned=0, workspace_limit=3) == (0, "budget")
    assert take(a, "new 3", 1003, earned=0, workspace_limit=3) == (57, "common")  # the common part's 2 are taken
    assert take(a, "grown", 1004, earned=1, workspace_limit=3) == (0, "budget")  # earned by its hostname
    assert take(b, "grown", 1005, earned=1, workspace_limit=3) == (55, "common")
