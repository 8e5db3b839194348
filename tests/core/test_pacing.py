"""The request budget shared by a provider's calls, and each workspace's share of it, on a clock the
tests move."""

from __future__ import annotations

import asyncio
import email.utils
import heapq
import itertools
import time
from collections.abc import Awaitable

import pytest

from core.edge import ProviderBusy
from core.edge.pacing import (
    BACKGROUND,
    Pacer,
    for_workspace,
    not_deferrable,
    parse_ratelimit,
    parse_retry_after,
)


class Clock:
    """A monotonic clock that moves only when a pacer sleeps or a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock():
    return Clock()


def pacer(clock: Clock, requests: int, window: float) -> Pacer:
    return Pacer(requests, window, monotonic=clock, sleep=clock.sleep)


class TestWindow:
    """Our own count of calls in a sliding window."""

    @pytest.mark.gen_test
    async def test_calls_within_the_budget_go_at_once(self, clock):
        budget = pacer(clock, 3, 60)
        for _ in range(3):
            await budget.acquire()
        assert clock.slept == []

    @pytest.mark.gen_test
    async def test_a_long_wait_is_busy_with_the_time_until_a_slot_frees(self, clock):
        budget = pacer(clock, 2, 60)
        await budget.acquire()
        clock.now += 15
        await budget.acquire()
        with pytest.raises(ProviderBusy) as caught:
            await budget.acquire()
        assert caught.value.retry_after == 45
        assert clock.slept == []

    @pytest.mark.gen_test
    async def test_the_window_slides(self, clock):
        budget = pacer(clock, 2, 10)
        await budget.acquire()
        clock.now += 5
        await budget.acquire()
        clock.now += 5
        await budget.acquire()  # the first call has left the window
        clock.now += 1
        with pytest.raises(ProviderBusy) as caught:
            await budget.acquire()
        assert caught.value.retry_after == 4

    @pytest.mark.gen_test
    async def test_a_refused_call_takes_nothing_from_the_budget(self, clock):
        budget = pacer(clock, 1, 10)
        await budget.acquire()
        clock.now += 5
        with pytest.raises(ProviderBusy):
            await budget.acquire()
        clock.now += 5
        await budget.acquire()

    @pytest.mark.gen_test
    async def test_a_short_wait_is_waited(self, clock):
        budget = pacer(clock, 1, 1.5)
        await budget.acquire()
        await budget.acquire()
        assert clock.slept == [1.5]

    @pytest.mark.gen_test
    async def test_waiting_callers_do_not_share_one_freed_slot(self):
        budget = Pacer(1, 0.2)
        done: list[float] = []

        async def call() -> None:
            await budget.acquire()
            done.append(time.monotonic())

        await asyncio.gather(call(), call(), call())
        assert done[1] - done[0] >= 0.19 and done[2] - done[1] >= 0.19


class TestProviderSays:
    """What the provider's headers tell the pacer."""

    @pytest.mark.gen_test
    async def test_retry_after_blocks_every_call_until_it_passes(self, clock):
        budget = pacer(clock, 100, 60)
        budget.observe(remaining=None, reset_seconds=None, retry_after=30)
        with pytest.raises(ProviderBusy) as caught:
            await budget.acquire()
        assert caught.value.retry_after == 30
        clock.now += 30
        await budget.acquire()

    @pytest.mark.gen_test
    async def test_a_short_retry_after_is_waited(self, clock):
        budget = pacer(clock, 100, 60)
        budget.observe(remaining=None, reset_seconds=None, retry_after=1)
        await budget.acquire()
        assert clock.slept == [1]

    @pytest.mark.gen_test
    async def test_nothing_remaining_blocks_until_the_reset(self, clock):
        budget = pacer(clock, 100, 60)
        budget.observe(remaining=0, reset_seconds=30, retry_after=None)
        with pytest.raises(ProviderBusy) as caught:
            await budget.acquire()
        assert caught.value.retry_after == 30
        clock.now += 30
        await budget.acquire()

    @pytest.mark.gen_test
    async def test_a_reset_asked_about_at_once_is_not_rounded_up_a_second(self, clock):
        clock.now = 8191.610680565681  # (now + 30) - now is 30.000000000000004 in floats
        budget = pacer(clock, 100, 60)
        budget.observe(remaining=0, reset_seconds=30, retry_after=None)
        with pytest.raises(ProviderBusy) as caught:
            await budget.acquire()
        assert caught.value.retry_after == 30

    @pytest.mark.gen_test
    async def test_what_remains_is_spent_by_our_calls(self, clock):
        budget = pacer(clock, 100, 60)
        budget.observe(remaining=2, reset_seconds=20, retry_after=None)
        await budget.acquire()
        await budget.acquire()
        with pytest.raises(ProviderBusy) as caught:
            await budget.acquire()
        assert caught.value.retry_after == 20


class TestHeaders:
    """Reading ``Ratelimit`` and ``Retry-After``."""

    @pytest.mark.parametrize(
        ("header", "expected"),
        [
            ('"default";r=50;t=30', (50, 30.0)),
            ('"default"; r=0 ; t=12', (0, 12.0)),
            ('"default";r=5;t=1;x=y', (5, 1.0)),
            ('default;r=5', (5, None)),
            ('"burst";r=10;t=1, "default";r=3;t=200', (3, 200.0)),
            ('"default";t=30', (None, None)),
            ('"default";r=many;t=30', (None, None)),
            ("", (None, None)),
            (None, (None, None)),
        ],
    )
    def test_ratelimit_gives_the_tightest_remaining_and_its_reset(self, header, expected):
        assert parse_ratelimit(header) == expected

    @pytest.mark.parametrize(("header", "expected"), [("120", 120.0), (" 1 ", 1.0), ("soon", None), ("-5", None), ("", None), (None, None)])
    def test_retry_after_in_seconds(self, header, expected):
        assert parse_retry_after(header) == expected

    def test_retry_after_as_an_http_date(self):
        now = time.time()
        assert parse_retry_after(email.utils.formatdate(now + 90, usegmt=True), now=now) == pytest.approx(90, abs=1)


class TestBackground:
    """Calls no one waits on (the lifecycle's): a share of the window, and everyone else first."""

    @staticmethod
    async def background(budget: Pacer) -> None:
        token = BACKGROUND.set(True)
        try:
            await budget.acquire()
        finally:
            BACKGROUND.reset(token)

    @pytest.mark.gen_test
    async def test_background_calls_are_spread_evenly_over_their_share_of_the_window(self, clock):
        budget = Pacer(10, 60, background_share=0.5, monotonic=clock, sleep=clock.sleep)
        for _ in range(5):
            await self.background(budget)
        assert clock.slept == [12, 12, 12]  # five in a window of 60 s: one every 12 s (two at once after idling)

    @pytest.mark.gen_test
    async def test_background_calls_take_at_most_their_share_of_any_window(self, clock):
        budget = Pacer(10, 60, background_share=0.5, monotonic=clock, sleep=clock.sleep)
        times = []
        for _ in range(12):
            await self.background(budget)
            times.append(clock.now)
        assert all(later - first >= 60 for first, later in zip(times, times[5:]))

    @pytest.mark.gen_test
    async def test_a_persons_call_is_not_refused_because_of_background_calls(self, clock):
        budget = Pacer(10, 60, background_share=0.5, monotonic=clock, sleep=clock.sleep)
        for _ in range(5):
            await self.background(budget)
        clock.slept.clear()
        for _ in range(5):
            await budget.acquire()  # the other half of the window is theirs
        assert clock.slept == []

    @pytest.mark.gen_test
    async def test_a_due_renewal_takes_its_turn_beyond_the_background_share(self, clock):
        budget = Pacer(10, 60, background_share=0.5, monotonic=clock, sleep=clock.sleep)
        for _ in range(5):
            await self.background(budget)
        clock.slept.clear()
        token = BACKGROUND.set(True)  # a background check, renewing a certificate that is due
        try:
            for _ in range(5):
                with not_deferrable():
                    await budget.acquire()
        finally:
            BACKGROUND.reset(token)
        assert clock.slept == []

    @pytest.mark.gen_test
    async def test_a_background_call_waits_instead_of_being_busy(self, clock):
        budget = Pacer(2, 30, background_share=1.0, monotonic=clock, sleep=clock.sleep)
        await budget.acquire()
        await budget.acquire()
        await self.background(budget)  # a person's call would get ProviderBusy here
        assert clock.slept == [30]

    @pytest.mark.gen_test
    async def test_a_background_call_that_would_wait_too_long_is_busy(self, clock):
        budget = Pacer(1, 3600, monotonic=clock, sleep=clock.sleep)
        await budget.acquire()
        with pytest.raises(ProviderBusy):
            await self.background(budget)

    @pytest.mark.gen_test
    async def test_a_background_call_lets_a_waiting_persons_call_go_first(self):
        budget = Pacer(1, 0.2, background_share=1.0)
        order: list[str] = []
        await budget.acquire()

        async def person() -> None:
            await budget.acquire()
            order.append("person")

        async def later() -> None:
            await asyncio.sleep(0.01)  # the person is already waiting
            await self.background(budget)
            order.append("background")

        await asyncio.gather(person(), later())
        assert order == ["person", "background"]

    @pytest.mark.gen_test
    async def test_the_providers_last_share_is_left_to_the_others(self, clock):
        budget = Pacer(10, 60, background_share=0.5, monotonic=clock, sleep=clock.sleep)
        budget.observe(remaining=5, reset_seconds=20, retry_after=None)  # the token was spent elsewhere
        await self.background(budget)
        assert clock.slept == [20]

    @pytest.mark.gen_test
    async def test_its_own_background_calls_do_not_count_as_spent_elsewhere(self, clock):
        budget = Pacer(10, 60, background_share=0.5, monotonic=clock, sleep=clock.sleep)
        for _ in range(4):
            await self.background(budget)
        budget.observe(remaining=6, reset_seconds=20, retry_after=None)  # what our own four calls left
        clock.slept.clear()
        await self.background(budget)
        assert clock.slept == [12]  # only the spacing (the fourth call set the grid)


async def acquire_for(budget: Pacer, workspace: str, *, background: bool = False, hostnames: int | None = None) -> None:
    """One call made for ``workspace`` (a background one if ``background``), which has ``hostnames``
    verified, active hostnames (``None``: none counted, as for a new workspace)."""

    async def active(seconds: float, at_most: int) -> int:
        assert hostnames is not None
        return min(hostnames, at_most)

    token = BACKGROUND.set(background)
    try:
        with for_workspace(workspace, None if hostnames is None else active):
            await budget.acquire()
    finally:
        BACKGROUND.reset(token)


async def calls_until_busy(budget: Pacer, workspace: str, *, hostnames: int | None = None, most: int = 100) -> int:
    """How many calls ``workspace`` makes at once before one is refused."""
    for n in range(most):
        try:
            await acquire_for(budget, workspace, hostnames=hostnames)
        except ProviderBusy:
            return n
    return most


class TestWorkspaceShare:
    """No workspace's calls take more than ``workspace_share`` of what their kind may take."""

    @pytest.mark.gen_test
    async def test_a_workspace_takes_at_most_its_share_of_the_window(self, clock):
        budget = Pacer(20, 60, workspace_share=0.25, monotonic=clock, sleep=clock.sleep)
        for _ in range(5):
            await acquire_for(budget, "a")
        clock.now += 10
        with pytest.raises(ProviderBusy) as caught:
            await acquire_for(budget, "a")
        assert caught.value.retry_after == 50  # when its first call leaves the window
        assert caught.value.message.startswith("This workspace has used its share")

    @pytest.mark.gen_test
    async def test_workspaces_with_active_hostnames_keep_the_rest_of_the_window(self, clock):
        budget = Pacer(20, 60, workspace_share=0.25, calls_per_hostname=1, monotonic=clock, sleep=clock.sleep)
        for _ in range(5):
            await acquire_for(budget, "a")
        for workspace in ("b", "c", "d"):
            for _ in range(5):
                await acquire_for(budget, workspace, hostnames=5)
        assert clock.slept == []

    @pytest.mark.gen_test
    async def test_a_workspace_held_back_takes_nothing_and_calls_again_once_its_calls_leave_the_window(self, clock):
        budget = Pacer(4, 60, workspace_share=0.5, calls_per_hostname=1, monotonic=clock, sleep=clock.sleep)
        await acquire_for(budget, "a")
        clock.now += 30
        await acquire_for(budget, "a")
        with pytest.raises(ProviderBusy):
            await acquire_for(budget, "a")
        clock.now += 30
        await acquire_for(budget, "a")
        await acquire_for(budget, "b", hostnames=2)
        await acquire_for(budget, "b", hostnames=2)  # the refused call took no slot

    @pytest.mark.gen_test
    async def test_calls_made_for_no_workspace_are_in_nobodys_share(self, clock):
        budget = Pacer(4, 60, workspace_share=0.25, monotonic=clock, sleep=clock.sleep)
        for _ in range(3):
            await budget.acquire()
        await acquire_for(budget, "a")

    @pytest.mark.gen_test
    async def test_a_share_of_1_lets_one_workspace_spend_the_whole_window(self, clock):
        budget = Pacer(5, 60, workspace_share=1.0, monotonic=clock, sleep=clock.sleep)
        for _ in range(5):
            await acquire_for(budget, "a")
        with pytest.raises(ProviderBusy) as caught:
            await acquire_for(budget, "a")
        assert "workspace" not in caught.value.message  # the budget itself is spent

    @pytest.mark.gen_test
    async def test_a_workspace_alone_may_spend_the_whole_background_share(self, clock):
        """Background calls are spread over the window and take turns: no cap of their own slows one
        workspace's big import."""
        budget = Pacer(20, 60, background_share=0.5, workspace_share=0.2, monotonic=clock, sleep=clock.sleep)
        for _ in range(10):  # the background's 10 a window, one every 6 s (two at once after idling)
            await acquire_for(budget, "a", background=True)
        assert clock.now < 1060  # all ten in the first window, beyond the 4 of a share of 0.2


class TestSharesGrow:
    """A workspace's share starts small and grows with its verified, active hostnames; what workspaces
    take beyond what their hostnames earn comes out of one common part: opening workspaces does
    not multiply a share."""

    @staticmethod
    def budget(clock: Clock, requests: int = 40) -> Pacer:
        """A quarter of the window at most for one workspace (10 of 40), a twentieth (2) for a new one."""
        return Pacer(requests, 60, workspace_share=0.25, new_workspace_share=0.05, calls_per_hostname=1,
                     monotonic=clock, sleep=clock.sleep)

    @pytest.mark.gen_test
    async def test_a_new_workspace_takes_at_most_the_new_workspace_share(self, clock):
        budget = self.budget(clock)
        assert await calls_until_busy(budget, "new", hostnames=0) == 2

    @pytest.mark.gen_test
    async def test_each_verified_active_hostname_adds_calls(self, clock):
        budget = self.budget(clock)
        assert await calls_until_busy(budget, "grown", hostnames=3) == 3 + 2

    @pytest.mark.gen_test
    async def test_hostnames_grow_a_share_up_to_the_workspace_share(self, clock):
        budget = self.budget(clock)
        assert await calls_until_busy(budget, "big", hostnames=500) == 10

    @pytest.mark.gen_test
    async def test_workspaces_without_hostnames_together_take_one_workspace_share(self, clock):
        budget = self.budget(clock)
        taken = [await calls_until_busy(budget, f"sign-up {n}", hostnames=0) for n in range(8)]
        assert taken == [2, 2, 2, 2, 2, 0, 0, 0]  # 10 of the window's 40, however many workspaces
        with pytest.raises(ProviderBusy) as caught:
            await acquire_for(budget, "sign-up 9", hostnames=0)
        assert caught.value.message.startswith("The part of the edge provider's request budget that workspaces share")
        assert caught.value.retry_after == 60

    @pytest.mark.gen_test
    async def test_six_workspaces_of_one_person_leave_a_quiet_workspace_served(self, clock):
        budget = self.budget(clock, requests=30)  # 7 a workspace at most, 1 for a new one
        for n in range(6):  # each with a verified, active hostname of its own
            await calls_until_busy(budget, f"mallory+{n}", hostnames=1)
        for _ in range(5):  # a quiet workspace's five certificates, each refreshed once
            await acquire_for(budget, "quiet", hostnames=5)
        assert clock.slept == []

    @pytest.mark.gen_test
    async def test_a_held_workspace_may_call_again_when_an_earned_call_leaves_the_window(self, clock):
        budget = self.budget(clock)
        await acquire_for(budget, "a", hostnames=1)  # earned by its hostname, leaves at 60
        clock.now += 10
        await acquire_for(budget, "a", hostnames=1)  # its two beyond that leave at 70 and 80
        clock.now += 10
        await acquire_for(budget, "a", hostnames=1)
        clock.now += 10
        with pytest.raises(ProviderBusy) as caught:
            await acquire_for(budget, "a", hostnames=1)
        assert caught.value.retry_after == 30
        assert caught.value.message.startswith("This workspace has used its share")

    @pytest.mark.gen_test
    async def test_active_hostnames_are_counted_only_for_the_calls_someone_waits_on(self, clock):
        counted = []

        async def active(seconds: float, at_most: int) -> int:
            counted.append((seconds, at_most))
            return 3

        budget = self.budget(clock)
        token = BACKGROUND.set(True)
        try:
            with for_workspace("a", active):
                await budget.acquire()
        finally:
            BACKGROUND.reset(token)
        unlimited = Pacer(40, 60, workspace_share=1.0, calls_per_hostname=1, monotonic=clock, sleep=clock.sleep)
        with for_workspace("a", active):
            await unlimited.acquire()
        assert counted == []
        with for_workspace("a", active):
            await budget.acquire()
        assert counted == [(60, 10)]  # issued a window ago at least; 10 earn the whole share


class VirtualTime:
    """A clock for several callers at once: the earliest sleeper wakes (at the same time, whoever
    slept first), alone, once every other caller has run as far as it can."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        woken = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._order), woken))
        await woken

    async def run(self, *calls: Awaitable[object]) -> None:
        tasks = [asyncio.ensure_future(call) for call in calls]
        while not all(task.done() for task in tasks):
            for _ in range(5):
                await asyncio.sleep(0)
            if self._sleepers:
                when, _, woken = heapq.heappop(self._sleepers)
                self.now = max(self.now, when)
                woken.set_result(None)
        for task in tasks:
            task.result()


class TestTurns:
    """When several workspaces' calls wait for the budget, a freed slot goes first to the one that
    has had fewest calls of that kind in the window."""

    @pytest.mark.gen_test
    async def test_a_freed_slot_goes_to_the_waiting_workspace_with_fewer_calls(self):
        time = VirtualTime()
        budget = Pacer(4, 60, max_wait_seconds=60, monotonic=time, sleep=time.sleep)
        went: list[tuple[str, float]] = []

        async def call(at: float, workspace: str, *, background: bool = False) -> None:
            await time.sleep(at)
            await acquire_for(budget, workspace, background=background)
            went.append((workspace, time.now - 1000))

        # a: three calls, b: one, the window full; then a waits first, b second, for one freed slot.
        await time.run(call(0, "a"), call(1, "a"), call(2, "a"), call(3, "b"), call(4, "a"), call(5, "b"))
        assert went[4:] == [("b", 60), ("a", 61)]

    @pytest.mark.gen_test
    async def test_workspaces_with_as_many_calls_go_in_the_order_they_came(self):
        time = VirtualTime()
        budget = Pacer(2, 60, max_wait_seconds=60, monotonic=time, sleep=time.sleep)
        went: list[str] = []

        async def call(at: float, workspace: str) -> None:
            await time.sleep(at)
            await acquire_for(budget, workspace)
            went.append(workspace)

        await time.run(call(0, "a"), call(1, "b"), call(2, "a"), call(3, "b"))
        assert went == ["a", "b", "a", "b"]

    @pytest.mark.gen_test
    async def test_background_calls_take_turns_the_same_way(self):
        time = VirtualTime()
        budget = Pacer(6, 60, background_share=0.5, monotonic=time, sleep=time.sleep)  # 3 a window, every 20 s
        went: list[tuple[str, float]] = []

        async def check(at: float, workspace: str) -> None:
            await time.sleep(at)
            await acquire_for(budget, workspace, background=True)
            went.append((workspace, time.now - 1000))

        # a's first two checks go at once (after idling); its third waits first, b's one check
        # second, for the next slot on the grid: b's turn. The window's three then wait for a's first.
        await time.run(check(0, "a"), check(1, "a"), check(2, "a"), check(3, "b"))
        assert went == [("a", 0), ("a", 1), ("b", 20), ("a", 60)]
