"""What service processes on one PostgreSQL database share beyond the records: rate-limit
windows, the provider's request budget and used sign-in states (migration 13).

On SQLite the service is one process and keeps these in memory (core/ratelimit.py,
core/edge/pacing.py, core/identity/portal_signin.py); these tables exist on PostgreSQL only.
Each operation is one short statement or transaction, made to be decided by the database alone,
so two processes asking at once get the answers one process would have given.
"""

from __future__ import annotations

from typing import Any


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
                  background_limit: int) -> float:
        """Take one call from the provider's budget shared by every process: 0 when taken, else
        the seconds until one may go. Under the budget's row lock, so two processes never both
        take the last call."""
        row = self.db.execute(
            "SELECT blocked_until FROM provider_budgets WHERE provider = ? FOR UPDATE", [provider]
        ).fetchone()
        if row is None:
            self.db.execute("INSERT INTO provider_budgets (provider, blocked_until) VALUES (?, 0) "
                            "ON CONFLICT DO NOTHING", [provider])
            row = self.db.execute(
                "SELECT blocked_until FROM provider_budgets WHERE provider = ? FOR UPDATE", [provider]
            ).fetchone()
        if row[0] > now:
            return float(row[0]) - now
        self.db.execute("DELETE FROM provider_calls WHERE provider = ? AND sent_at <= ?", [provider, now - window])
        sent = [r[0] for r in self.db.execute(
            "SELECT sent_at, background FROM provider_calls WHERE provider = ? ORDER BY sent_at", [provider]
        ).fetchall()]
        if len(sent) >= limit:
            return float(sent[len(sent) - limit]) + window - now
        if background:
            ours = [r[0] for r in self.db.execute(
                "SELECT sent_at FROM provider_calls WHERE provider = ? AND background = 1 ORDER BY sent_at", [provider]
            ).fetchall()]
            if len(ours) >= background_limit:
                return float(ours[len(ours) - background_limit]) + window - now
        self.db.execute("INSERT INTO provider_calls (provider, sent_at, background) VALUES (?, ?, ?)",
                        [provider, now, int(background)])
        return 0.0

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
