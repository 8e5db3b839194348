"""The provider's request budget, shared by every service process on one PostgreSQL database.

Each process's ``Pacer`` (core/edge/pacing.py) still decides when its own call may go (its
background share, the provider's own ``Ratelimit`` and ``Retry-After``); then the call is taken
from this budget, which counts the calls of all processes in the same sliding window under one
row lock (store/shared.py): each workspace's share of it too, and whose turn it is when several
workspaces' calls wait. A ``Retry-After`` one process hears blocks every process. Times are the
wall clock's: processes on several machines share no monotonic clock.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store import Store


class SharedBudget:
    def __init__(self, store: Store, provider: str, *, requests: int, window_seconds: float,
                 background_requests: int, workspace_requests: dict[bool, int], turn_seconds: float) -> None:
        self.store = store
        self.provider = provider
        self.requests = requests
        self.window_seconds = window_seconds
        self.background_requests = background_requests
        self.workspace_requests = workspace_requests
        "The most calls of one workspace in any window, by kind (background or not)."
        self.turn_seconds = turn_seconds
        "How long a call waits when a freed slot is another workspace's turn."

    async def take(self, *, background: bool, workspace: str | None, patience: float) -> tuple[float, bool]:
        """``(0, False)`` when a call was taken for this process, else the seconds until one may be
        and whether the workspace's own share (rather than the budget) held it back. ``patience``:
        the longest the caller would wait for the budget (a longer wait is not waited)."""
        return await self.store.run(self._take, background, workspace, patience)

    def _take(self, background: bool, workspace: str | None, patience: float) -> tuple[float, bool]:
        with self.store.transaction(row_locked=True):
            return self.store.shared.take_call(
                self.provider, now=time.time(), window=self.window_seconds, limit=self.requests,
                background=background, background_limit=self.background_requests, workspace=workspace,
                workspace_limit=self.workspace_requests[background], patience=patience, turn=self.turn_seconds,
            )

    async def block(self, seconds: float) -> None:
        """No process calls the provider for ``seconds`` (it said ``Retry-After``)."""
        await self.store.run(self.store.shared.block_provider, self.provider, time.time() + seconds)
