"""The provider's request budget, shared by every service process on one PostgreSQL database.

Each process's ``Pacer`` (core/edge/pacing.py) still decides when its own call may go (its
background share, the provider's own ``Ratelimit`` and ``Retry-After``); then the call is taken
from this budget, which counts the calls of all processes in the same sliding window under one
row lock (store/shared.py): each workspace's share of it too (what its hostnames earn, and the
common part beyond that), and whose turn it is when several workspaces' calls wait. A ``Retry-After`` one process hears blocks every process. Times are the
wall clock's: processes on several machines share no monotonic clock.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store import Store


class SharedBudget:
    def __init__(self, store: Store, provider: str, *, requests: int, window_seconds: float,
                 background_requests: int, workspace_requests: dict[bool, int], new_workspace_requests: int,
                 common_requests: int, turn_seconds: float) -> None:
        self.store = store
        self.provider = provider
        self.requests = requests
        self.window_seconds = window_seconds
        self.background_requests = background_requests
        self.workspace_requests = workspace_requests
        "The most calls of one workspace in any window, by kind (background or not)."
        self.new_workspace_requests = new_workspace_requests
        "The most calls of one workspace beyond what its hostnames earn, in any window."
        self.common_requests = common_requests
        "The most calls of all workspaces together beyond what their hostnames earn, in any window."
        self.turn_seconds = turn_seconds
        "How long a call waits when a freed slot is another workspace's turn."

    async def take(self, *, background: bool, workspace: str | None, patience: float,
                   earned: int | None) -> tuple[float, str, bool]:
        """``(0, _, common)`` when a call was taken for this process (``common``: out of the common
        part), else the seconds until one may be and what held it back: the budget, the workspace's
        own share or the common part (``pacing.BUDGET``, ``SHARE``, ``COMMON``). ``patience``: the
        longest the caller would wait for the budget (a longer wait is not waited); ``earned``: the
        calls the workspace's hostnames earn it (``None``: its share does not grow)."""
        return await self.store.run(self._take, background, workspace, patience, earned)

    def _take(self, background: bool, workspace: str | None, patience: float,
              earned: int | None) -> tuple[float, str, bool]:
        with self.store.transaction(row_locked=True):
            return self.store.shared.take_call(
                self.provider, now=time.time(), window=self.window_seconds, limit=self.requests,
                background=background, background_limit=self.background_requests, workspace=workspace,
                workspace_limit=self.workspace_requests[background], patience=patience, turn=self.turn_seconds,
                earned=earned, new_workspace_limit=self.new_workspace_requests, common_limit=self.common_requests,
            )

    async def block(self, seconds: float) -> None:
        """No process calls the provider for ``seconds`` (it said ``Retry-After``)."""
        await self.store.run(self.store.shared.block_provider, self.provider, time.time() + seconds)
