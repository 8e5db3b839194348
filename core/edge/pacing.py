"""One request budget per provider adapter, so a burst of work never earns us a 429, and no
workspace spends it for the others.

Cloudflare blocks *every* call of a token for minutes once it is over its limit, so staying under
it matters more than any single request. The ``Pacer`` counts our own calls in a sliding window and
also believes what the provider says (``Ratelimit`` and ``Retry-After``), since the same token may
be spent elsewhere (the dashboard, another installation).

Calls the background checks make (core/lifecycle/, marked with ``BACKGROUND``) come second: they
take at most ``background_share`` of the window, spread evenly over it, wait while a person's or
client's call waits, and wait for their turn instead of failing with ``ProviderBusy`` (up to
``BACKGROUND_MAX_WAIT`` or one window, whichever is shorter, so a check's lease outlives its
wait). The rest of the window stays free for the calls someone is waiting on.

The budget is every tenant's, so no workspace may spend it alone: the calls someone waits on that
are made for a workspace (marked with ``for_workspace``, around everything core/certificates/ asks
the provider) take at most ``workspace_share`` of any window. A share that any sign-up gets in full
could be multiplied by opening workspaces (sign-up is public, and one person may have many e-mail
addresses), so a workspace's share starts small and grows with what is costly to multiply: its
hostnames that are verified and serving a certificate issued at least one window ago
(``active_hostnames``, given to ``for_workspace``; a hostname made active by calls of this window
earns nothing in it, or one workspace could chain orders: each certificate earning the next).
Each such hostname earns ``calls_per_hostname`` calls of the window; beyond them a workspace takes
at most ``new_workspace_share`` of the window, and those calls of all workspaces together come out
of one common part, one ``workspace_share`` of the window, however many workspaces there are. So
opening workspaces adds nothing but a turn at the common part; only hostnames verified and kept
active add calls, one each however they are spread over workspaces. A workspace over its share is
told ``ProviderBusy`` (``ShareSpent``) with its own message (another when the common part is
spent), and the rest stays for the others. ``workspace_share = 1`` sets no limit at all (an
installation with one tenant).

When calls of several workspaces wait for the budget at once, they take turns: a freed slot goes
first to the waiting workspace that has had fewest calls of that kind in the window (ties: whoever
looks first). The background share is divided by those turns alone: background calls are spread
evenly over the window and wait rather than fail, so no workspace can spend that share ahead of
another, and a workspace alone may use all of it (a cap there would only slow one tenant's big
import). The marking is a context variable, so adapters stay unaware of workspaces: any adapter
that paces its calls with a ``Pacer`` (Cloudflare's; an ACME CA's orders) divides its budget this
way. Calls made for no workspace (the DCV delegation id) are counted in the window but in nobody's
share.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import math
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Hashable, Iterator
from typing import TYPE_CHECKING

from core.edge import ProviderBusy, ShareSpent
from core.edge.shared_budget import SharedBudget

if TYPE_CHECKING:
    from store import Store

#: Set (to True) around the provider calls no one is waiting on.
BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar("background_provider_call", default=False)
#: The workspace (its id, as text) the provider calls are made for; ``for_workspace`` sets it.
WORKSPACE: contextvars.ContextVar[str | None] = contextvars.ContextVar("provider_call_workspace", default=None)
#: How many of that workspace's hostnames are verified and serving a certificate issued at least the
#: given seconds ago (counted up to the given number), asked only when its share needs it.
ActiveHostnames = Callable[[float, int], Awaitable[int]]
ACTIVE_HOSTNAMES: contextvars.ContextVar[ActiveHostnames | None] = contextvars.ContextVar(
    "provider_call_active_hostnames", default=None)
#: The longest a background call waits for its turn before it gives up with ``ProviderBusy``.
BACKGROUND_MAX_WAIT = 60.0
#: How often a call waiting behind another's turn (a person's, a less served workspace's) looks again.
_YIELD_SECONDS = 0.05


#: Why a call may not go yet: the budget itself, the workspace's own share, or the common part
#: every workspace's calls beyond their hostnames' come out of.
BUDGET, SHARE, COMMON = "budget", "share", "common"
_HELD_MESSAGES = {
    SHARE: "This workspace has used its share of the edge provider's request budget (a share that grows with "
           "its verified, active hostnames); retry after {seconds} seconds.",
    COMMON: "The part of the edge provider's request budget that workspaces share beyond what their verified, "
            "active hostnames earn is spent for now; retry after {seconds} seconds.",
}


@contextlib.contextmanager
def for_workspace(workspace_id: object, active_hostnames: ActiveHostnames | None = None) -> Iterator[None]:
    """The provider calls made inside are this workspace's: counted in its share of the budget, which
    grows with the count ``active_hostnames`` gives (none given: the share of a new workspace)."""
    token = WORKSPACE.set(str(workspace_id))
    counted = ACTIVE_HOSTNAMES.set(active_hostnames)
    try:
        yield
    finally:
        ACTIVE_HOSTNAMES.reset(counted)
        WORKSPACE.reset(token)


@contextlib.contextmanager
def not_deferrable(call: bool = True) -> Iterator[None]:
    """The background call made inside (when ``call``) takes its turn as a person's does, not from the
    background share: a certificate's renewal that is due. Renewals fall due at the rate their
    certificates were issued, which may be the CA's whole budget (an import); held to the background
    half, the last of a wave of six-day certificates went at 0.81 of its life (bench/short_lived.py)."""
    token = BACKGROUND.set(False) if call else None
    try:
        yield
    finally:
        if token is not None:
            BACKGROUND.reset(token)


class _Window:
    """The calls sent in the last ``seconds``, each with whose it was."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls: deque[tuple[float, Hashable]] = deque()
        self.used: Counter[Hashable] = Counter()
        "Calls in the window by whose they were."

    def __len__(self) -> int:
        return len(self.calls)

    def prune(self, now: float) -> None:
        while self.calls and self.calls[0][0] <= now - self.seconds:
            _, key = self.calls.popleft()
            self.used[key] -= 1
            if not self.used[key]:
                del self.used[key]

    def add(self, now: float, key: Hashable) -> None:
        self.calls.append((now, key))
        self.used[key] += 1

    def wait(self, now: float, limit: int) -> float:
        """Seconds until fewer than ``limit`` calls are in the window."""
        if len(self.calls) < limit:
            return 0.0
        return self.calls[len(self.calls) - limit][0] + self.seconds - now

    def wait_of(self, now: float, key: Hashable, limit: int) -> float:
        """Seconds until fewer than ``limit`` of ``key``'s calls are in the window."""
        if self.used[key] < limit:
            return 0.0
        times = [t for t, k in self.calls if k == key]
        return times[len(times) - limit] + self.seconds - now


class Pacer:
    """At most ``requests`` calls in any ``window_seconds``, never more than the provider allows,
    and no workspace's calls more than their share, which grows with its active hostnames."""

    def __init__(
        self,
        requests: int,
        window_seconds: float,
        *,
        background_share: float = 1.0,
        workspace_share: float = 1.0,
        new_workspace_share: float | None = None,
        calls_per_hostname: int = 0,
        max_wait_seconds: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.requests = requests
        self.window_seconds = window_seconds
        self.background_requests = max(1, int(requests * background_share))
        "The most background calls in any window."
        self.workspace_requests = {False: max(1, int(requests * workspace_share)), True: self.background_requests}
        "The most calls of one workspace in any window: those someone waits on (False), background ones (True)."
        self.shares_grow = workspace_share < 1
        "Whether the share of a workspace's calls someone waits on starts small and grows (1: no limit at all)."
        new_share = workspace_share if new_workspace_share is None else min(new_workspace_share, workspace_share)
        self.new_workspace_requests = max(1, int(requests * new_share))
        "The most calls of one workspace beyond what its hostnames earn, in any window."
        self.common_requests = self.workspace_requests[False]
        "The most calls of all workspaces together beyond what their hostnames earn, in any window."
        self.calls_per_hostname = calls_per_hostname
        self.max_wait_seconds = max_wait_seconds
        self._monotonic = monotonic
        self._sleep = sleep
        self._sent = _Window(window_seconds)  # every call, by (background, workspace)
        self._background_sent = _Window(window_seconds)  # the background calls among them
        self._earned = _Window(window_seconds)  # the calls someone waits on, within what the hostnames earn
        self._common = _Window(window_seconds)  # the others (when shares grow), by workspace
        self._background_next = 0.0  # when the next background call may go: they are spread evenly
        self._waiting = 0  # calls someone is waiting on, sleeping for their turn
        self._wanting: dict[bool, Counter[str]] = {False: Counter(), True: Counter()}
        "By kind (background or not), the workspaces whose calls sleep until the budget has room."
        self._blocked_until = 0.0
        self._remaining: int | None = None  # what the provider said is left, until _remaining_until
        self._remaining_until = 0.0
        self.shared: SharedBudget | None = None
        "The budget every process on one PostgreSQL database takes its calls from, after this one."

    def share_with_processes(self, store: Store, provider: str) -> None:
        """Take each call also from the budget of every process on ``store``'s PostgreSQL database
        (``provider`` names it there), on these same terms."""
        self.shared = SharedBudget(
            store, provider, requests=self.requests, window_seconds=self.window_seconds,
            background_requests=self.background_requests, workspace_requests=self.workspace_requests,
            new_workspace_requests=self.new_workspace_requests, common_requests=self.common_requests,
            turn_seconds=_YIELD_SECONDS,
        )

    def _wait(self, now: float) -> float:
        """Seconds until a call may go (0 when it may go now)."""
        waits = [self._blocked_until - now, self._sent.wait(now, self.requests)]
        if self._remaining is not None:
            if now >= self._remaining_until:
                self._remaining = None
            elif self._remaining <= 0:
                waits.append(self._remaining_until - now)
        return max(0.0, *waits)

    def _background_wait(self, now: float) -> float:
        """The further wait of a background call: its share of the window, and everyone else first."""
        waits = [_YIELD_SECONDS if self._waiting else 0.0, self._background_next - now,
                 self._background_sent.wait(now, self.background_requests)]
        # What the provider says is left, once the others' calls this window are counted, is not
        # more than the others' part: someone else (the dashboard, another installation) spent ours.
        others_left = self.requests - self.background_requests - (len(self._sent) - len(self._background_sent))
        if self._remaining is not None and now < self._remaining_until and self._remaining <= others_left:
            waits.append(self._remaining_until - now)
        return max(waits)

    async def _earned_calls(self, background: bool, workspace: str | None) -> int | None:
        """The calls the workspace's active hostnames earn it in a window; ``None`` when its share
        does not grow (a background call, no workspace, no limit)."""
        if background or workspace is None or not self.shares_grow:
            return None
        count = ACTIVE_HOSTNAMES.get()
        if count is None or self.calls_per_hostname <= 0:
            return 0
        most = self.workspace_requests[False]
        return min(most, self.calls_per_hostname * await count(self.window_seconds, -(-most // self.calls_per_hostname)))

    def _share_wait(self, now: float, background: bool, workspace: str | None,
                    earned: int | None) -> tuple[float, str, bool]:
        """Seconds until the workspace's call of this kind is within its share of the window again,
        what holds it back (``SHARE`` or ``COMMON``), and whether it would come out of the common part."""
        if workspace is None:
            return 0.0, SHARE, False
        held = self._sent.wait_of(now, (background, workspace), self.workspace_requests[background])
        if earned is None or self._earned.used[workspace] < earned:
            return held, SHARE, False
        own = self._common.wait_of(now, workspace, self.new_workspace_requests)
        common = self._common.wait(now, self.common_requests)
        # Either room in the common part, or one of its earned calls leaving the window.
        part = min(max(own, common), self._earned.wait_of(now, workspace, earned) if earned else math.inf)
        return max(held, part), COMMON if common > max(held, own) and part == max(own, common) else SHARE, True

    def _turn_wait(self, background: bool, workspace: str | None) -> float:
        """A short wait when another workspace, with fewer calls of this kind in the window, is
        waiting for one: the room there is, is its turn first."""
        if workspace is None:
            return 0.0
        used = self._sent.used
        mine = used[(background, workspace)]
        others = (w for w in self._wanting[background] if w != workspace)
        return _YIELD_SECONDS if any(used[(background, w)] < mine for w in others) else 0.0

    async def acquire(self) -> None:
        """Take one call from the budget, waiting briefly if that is enough.

        A longer wait is not worth holding a request open for: ``ProviderBusy`` tells the caller
        when to come back, and nothing is taken from the budget.
        """
        background, workspace = BACKGROUND.get(), WORKSPACE.get()
        longest = min(BACKGROUND_MAX_WAIT, self.window_seconds) if background else self.max_wait_seconds
        earned = await self._earned_calls(background, workspace)
        while True:
            now = self._monotonic()
            for window in (self._sent, self._background_sent, self._earned, self._common):
                window.prune(now)
            wait = self._wait(now)
            if background:
                wait = max(wait, self._background_wait(now))
            # By its own share (or the common part), not by the budget:
            held, why, common = self._share_wait(now, background, workspace, earned)
            if wait <= 0 and held <= 0:
                wait = self._turn_wait(background, workspace)
            if wait <= 0 and held <= 0 and self.shared is not None:
                wait, why, common = await self.shared.take(background=background, workspace=workspace,
                                                           patience=longest, earned=earned)
                wait, held = (0.0, wait) if why != BUDGET else (wait, 0.0)
                now = self._monotonic()
            if wait <= 0 and held <= 0:
                self._take(now, background, workspace, None if earned is None else common)
                return
            if max(wait, held) > longest:
                # Rounded first: (now + 30) - now can be 30.000000000004 in floats, which is not 31 s.
                seconds = math.ceil(round(max(wait, held), 3))
                if wait >= held:
                    raise ProviderBusy(seconds)
                raise ShareSpent(seconds, _HELD_MESSAGES[why].format(seconds=max(1, seconds)), common=why == COMMON)
            await self._sleep_for(max(wait, held), background, workspace, wanting=wait >= held)

    def _take(self, now: float, background: bool, workspace: str | None, common: bool | None) -> None:
        """One call taken; ``common``: whether out of the common part (``None``: the share does not grow)."""
        self._sent.add(now, (background, workspace))
        if common is not None:
            (self._common if common else self._earned).add(now, workspace)
        if background:
            self._background_sent.add(now, (background, workspace))
            # On a grid of window / share: a call that went a little late (the event loop was
            # busy) does not push every later one back; after an idle spell, two may go.
            spacing = self.window_seconds / self.background_requests
            self._background_next = max(self._background_next, now - spacing) + spacing
        if self._remaining is not None:
            self._remaining -= 1

    async def _sleep_for(self, seconds: float, background: bool, workspace: str | None, *, wanting: bool) -> None:
        """Sleep, then look again (another caller may have taken the slot). A call ``wanting`` room in
        the budget (not held back by its workspace's share alone) is, meanwhile, one the background
        lets go first if someone waits on it, and one whose workspace's turn may come."""
        person = wanting and not background
        turn = workspace if wanting else None  # the workspace whose turn may come
        self._waiting += person
        if turn is not None:
            self._wanting[background][turn] += 1
        try:
            await self._sleep(seconds)
        finally:
            self._waiting -= person
            if turn is not None:
                self._wanting[background][turn] -= 1
                if not self._wanting[background][turn]:
                    del self._wanting[background][turn]

    async def tell_others(self, retry_after: float | None) -> None:
        """The provider's ``Retry-After`` holds for every process sharing the budget."""
        if self.shared is not None and retry_after is not None and retry_after > 0:
            await self.shared.block(retry_after)

    def observe(self, *, remaining: int | None, reset_seconds: float | None, retry_after: float | None) -> None:
        """Believe the provider's own accounting from one response's headers."""
        now = self._monotonic()
        if retry_after is not None and retry_after > 0:
            self._blocked_until = max(self._blocked_until, now + retry_after)
        if remaining is not None:
            self._remaining = remaining
            reset = reset_seconds if reset_seconds is not None else self.window_seconds
            self._remaining_until = now + reset


def parse_ratelimit(header: str | None) -> tuple[int | None, float | None]:
    """``(remaining, reset seconds)`` from ``Ratelimit: "default";r=50;t=30`` (the tightest item)."""
    best: tuple[int | None, float | None] = (None, None)
    for item in (header or "").split(","):
        params = {}
        for part in item.split(";")[1:]:
            key, _, value = part.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        try:
            remaining = int(params["r"])
            reset = float(params["t"]) if "t" in params else None
        except (KeyError, ValueError):
            continue
        if best[0] is None or remaining < best[0]:
            best = (remaining, reset)
    return best


def parse_retry_after(header: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``Retry-After`` (delta-seconds or an HTTP date); ``None`` if absent or bad."""
    if not header:
        return None
    value = header.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
