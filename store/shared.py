"""What service processes on one PostgreSQL database share beyond the records: rate-limit
windows, the provider's request budget and used sign-in states (migration 13), each
workspace's calls in that budget (migration 15), and which of them came out of the part every
workspace shares beyond what its hostnames earn (migration 20).

On SQLite the service is one process and keeps these in memory (core/ratelimit.py,
core/edge/pacing.py, core/identity/portal_signin.py); these tables exist on PostgreSQL only.
Each operation is one short statement or transaction, made to be decided by the database alone,
so two processes asking at once get the answers one process would have given.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

#: How long past the moment it said it would look again a waiting call is still believed to wait.
WAITING_GRACE = 1.0


def _room(calls: list[Any], limit: int, window: float, now: float) -> float:
    """Seconds until fewer than ``limit`` of ``calls`` (``sent_at`` first, oldest first) are in the window."""
    if len(calls) < limit:
        return 0.0
    return float(calls[len(calls) - limit][0]) + window - now


class SharedRepo:
    def __init__(self, db: Any) -> None:
        self.db = db

    # --- rate limits --------------------------------------------------------------------------

    def count_hits(self, bucket: str, client: str, window: int, hits: int) -> int:
        """Count ``hits`` requests of ``client`` in ``bucket``'s fixed window ``window``: the count
        now, which went up by exactly ``hits`` (so the caller knows the count before, too)."""
        [count] = self.db.execute(
            """INSERT INTO rate_windows (bucket, client, window_index, n) VALUES (?, ?, ?, ?)
               ON CONFLICT (bucket, client, window_index) DO UPDATE SET n = rate_windows.n + excluded.n
               RETURNING n""",
            [bucket, client, window, hits],
        ).fetchone()
        return int(count)

    def forget_windows(self, before: int) -> int:
        """Drop the counts of windows that ended (a periodic job)."""
        return int(self.db.execute("DELETE FROM rate_windows WHERE window_index < ?", [before]).rowcount)

    # --- the provider's request budget --------------------------------------------------------

    def take_call(self, provider: str, *, now: float, window: float, limit: int, background: bool,
                  background_limit: int, workspace: str | None, workspace_limit: int, patience: float,
                  turn: float, earned: int | None = None, new_workspace_limit: int = 0,
                  common_limit: int = 0) -> tuple[float, str, bool]:
        """Take one call from the provider's budget shared by every process: ``(0, _, common)`` when
        taken, else the seconds until one may go and what held it back: ``"budget"``, the
        workspace's own share of its kind of call (``"share"``: ``workspace_limit`` in the window)
        or the common part (``"common"``). Under the budget's row lock, so two processes never both
        take the last call.

        With ``earned`` (the calls the workspace's hostnames earn it; ``None``: its share does not
        grow), a call beyond those comes out of the common part (``common`` true): at most
        ``new_workspace_limit`` of the workspace's and ``common_limit`` of all workspaces' calls
        there in the window (core/edge/pacing.py says why).

        A workspace's call the budget holds back is noted as waiting, until a little after it will
        look again (if it will: within ``patience``). A call that finds room while another
        workspace, with fewer calls of the same kind in the window, waits, lets that one go first:
        it is told to look again in ``turn`` seconds."""
        row = self.db.execute(
            "SELECT blocked_until FROM provider_budgets WHERE provider = ? FOR UPDATE", [provider]
        ).fetchone()
        if row is None:
            self.db.execute("INSERT INTO provider_budgets (provider, blocked_until) VALUES (?, 0) "
                            "ON CONFLICT DO NOTHING", [provider])
            row = self.db.execute(
                "SELECT blocked_until FROM provider_budgets WHERE provider = ? FOR UPDATE", [provider]
            ).fetchone()
        self.db.execute("DELETE FROM provider_calls WHERE provider = ? AND sent_at <= ?", [provider, now - window])
        self.db.execute("DELETE FROM provider_waiters WHERE provider = ? AND until < ?", [provider, now])
        calls = self.db.execute(
            "SELECT sent_at, background, workspace, common FROM provider_calls WHERE provider = ? ORDER BY sent_at",
            [provider],
        ).fetchall()
        waits = [float(row[0]) - now, _room(calls, limit, window, now)]
        if background:
            waits.append(_room([c for c in calls if c[1]], background_limit, window, now))
        wait = max(0.0, *waits)
        common = False
        if workspace is not None:
            mine = [c for c in calls if bool(c[1]) == background and c[2] == workspace]
            held, why = _room(mine, workspace_limit, window, now), "share"
            own = [c for c in mine if not c[3]]
            if earned is not None and len(own) >= earned:
                common = True
                alone = _room([c for c in mine if c[3]], new_workspace_limit, window, now)
                shared = _room([c for c in calls if c[3]], common_limit, window, now)
                # Either room in the common part, or one of its earned calls leaving the window.
                part = min(max(alone, shared), _room(own, earned, window, now) if earned else float("inf"))
                if part > held:
                    held, why = part, "common" if shared > alone and part == shared else "share"
            if held > wait:
                self._done_waiting(provider, workspace, background)
                return held, why, common
            if wait <= 0 and self._others_turn(provider, workspace, background, calls):
                wait = turn
            if 0 < wait <= patience:
                self.db.execute(
                    """INSERT INTO provider_waiters (provider, workspace, background, until) VALUES (?, ?, ?, ?)
                       ON CONFLICT (provider, workspace, background)
                       DO UPDATE SET until = greatest(provider_waiters.until, excluded.until)""",
                    [provider, workspace, int(background), now + wait + WAITING_GRACE],
                )
        if wait > 0:
            return wait, "budget", common
        self.db.execute(
            "INSERT INTO provider_calls (provider, sent_at, background, workspace, common) VALUES (?, ?, ?, ?, ?)",
            [provider, now, int(background), workspace or "", int(common)],
        )
        if workspace is not None:
            self._done_waiting(provider, workspace, background)
        return 0.0, "budget", common

    def _others_turn(self, provider: str, workspace: str, background: bool, calls: list[Any]) -> bool:
        """Whether another workspace with fewer calls of this kind in the window is waiting for one."""
        used = Counter(c[2] for c in calls if bool(c[1]) == background)
        waiting = self.db.execute(
            "SELECT workspace FROM provider_waiters WHERE provider = ? AND background = ? AND workspace <> ?",
            [provider, int(background), workspace],
        ).fetchall()
        return any(used[w] < used[workspace] for (w,) in waiting)

    def _done_waiting(self, provider: str, workspace: str, background: bool) -> None:
        self.db.execute("DELETE FROM provider_waiters WHERE provider = ? AND workspace = ? AND background = ?",
                        [provider, workspace, int(background)])

    def block_provider(self, provider: str, until: float) -> None:
        """The provider said to wait (``Retry-After``): no process calls it before ``until``."""
        self.db.execute(
            """INSERT INTO provider_budgets (provider, blocked_until) VALUES (?, ?)
               ON CONFLICT (provider) DO UPDATE SET blocked_until = greatest(provider_budgets.blocked_until, ?)""",
            [provider, until, until],
        )

    # --- sign-in states -----------------------------------------------------------------------

    def use_state(self, state_hash: str, *, now: float, forget_before: float) -> bool:
        """True the first time a portal sign-in state is used, by any process; false ever after."""
        self.db.execute("DELETE FROM used_signin_states WHERE used_at < ?", [forget_before])
        return bool(self.db.execute(
            "INSERT INTO used_signin_states (state_hash, used_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
            [state_hash, now],
        ).rowcount)
