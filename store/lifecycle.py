"""The background checks' schedule, kept on the domains themselves (``next_check_at``).

A check is claimed by pushing ``next_check_at`` forward to the end of a lease in the same
statement that finds it due, so two processes on one database never check one domain at once,
and a process that dies mid-check leaves the domain due again once its lease runs out.

Workspaces take turns: a claim shares its checks out among the workspaces with due checks, one
each in rounds, each workspace's longest due first. One workspace's thousands of overdue checks
then delay another's by one turn, not by all of them. The workspaces with a due check are found
with one index probe each (``domains_workspace_next_check``), so a claim costs the number of
workspaces, never the size of a backlog.

Within a workspace, a certificate already requested and not issued yet is refreshed before newer
domains are verified (``domains_refresh_due``, migration 19): in a big import every verification
is overdue at once, and in due order the first refresh waited for the last verification, so the
first domain went active with the last. Such refreshes go ahead of their turn in all but one of a
workspace's checks at once: that one keeps verifying, whatever the refreshes due (with half kept
for verifications, refreshes fell behind the requests: 300 domains, median time to active 1.18 x
its ideal, against 1.07 x; bench/lifecycle.py).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from store._rows import from_ts, postgres, ts, uid
from store.domains import DomainRepo

if TYPE_CHECKING:
    from store.sqlite.connection import Database


class LifecycleRepo:
    def __init__(self, db: Database, domains: DomainRepo) -> None:
        self.db = db
        self.domains = domains

    def claim(self, now: dt.datetime, lease_until: dt.datetime, limit: int, *, cap: int | None = None,
              running: Mapping[uuid.UUID, int] | None = None, refreshing: Mapping[uuid.UUID, int] | None = None,
              after: uuid.UUID | None = None) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """Up to ``limit`` due checks, shared out among the workspaces in turn (the first turn goes
        to the workspace after ``after``), leased until ``lease_until``: (workspace, domain). A
        workspace gets at most ``cap`` less its checks ``running``; of those ``refreshing`` a
        requested certificate, at most ``cap`` less one (one of one) went ahead of their turn. Call it in
        ``store.transaction(row_locked=True)``: on PostgreSQL its row locks keep processes claiming
        at once apart, where SERIALIZABLE claims abort each other (a third of them with two
        processes, measured), past a unit's retries."""
        due = [row[0] for row in self.db.execute(
            """SELECT id FROM workspaces w WHERE EXISTS (
                   SELECT 1 FROM domains d WHERE d.workspace_id = w.id AND d.next_check_at <= ?)
               ORDER BY id""", [ts(now)]).fetchall()]
        first = next((i for i, w in enumerate(due) if after is not None and w > str(after)), 0)
        order = due[first:] + due[:first]
        most = cap if cap is not None else limit
        room_left = {w: most - (running or {}).get(uuid.UUID(w), 0) for w in order}
        ahead_left = {w: max(1, most - 1) - (refreshing or {}).get(uuid.UUID(w), 0) for w in order}
        claimed: list[tuple[uuid.UUID, uuid.UUID]] = []
        while order and len(claimed) < limit:
            more = []  # the workspaces that had as many due as they were given: they may have more
            for workspace, share in _turns(order, limit - len(claimed), room_left).items():
                ahead = self._claim_of(workspace, min(share, ahead_left[workspace]), now, lease_until, _REFRESH_DUE)
                ahead_left[workspace] -= len(ahead)
                got = ahead + self._claim_of(workspace, share - len(ahead), now, lease_until)
                claimed += got
                room_left[workspace] -= len(got)
                if len(got) == share:
                    more.append(workspace)
            order = more
        self.domains.forget([d for _, d in claimed])
        return claimed

    def _claim_of(self, workspace: str, limit: int, now: dt.datetime, lease_until: dt.datetime,
                  only: str = "") -> list[tuple[uuid.UUID, uuid.UUID]]:
        """One workspace's ``limit`` longest due checks (those matching ``only``), leased. Chosen,
        then leased by id: as one ``UPDATE ... WHERE id IN (SELECT ... LIMIT)``, PostgreSQL may run
        the subquery again for a plan's rescan and lease more than ``limit``."""
        if limit <= 0:
            return []
        ids = [row[0] for row in self.db.execute(
            f"""SELECT id FROM domains WHERE workspace_id = ? AND next_check_at <= ?{only}
               ORDER BY next_check_at, id LIMIT ?"""
            # Another process's claim in progress is passed over, not waited for.
            + (" FOR UPDATE SKIP LOCKED" if postgres(self.db) else ""),
            [workspace, ts(now), limit],
        ).fetchall()]
        if ids:
            self.db.execute(f"UPDATE domains SET next_check_at = ? WHERE id IN ({', '.join('?' for _ in ids)})",
                            [ts(lease_until), *ids])
        return [(uuid.UUID(workspace), uuid.UUID(d)) for d in ids]

    def release(self, domain_id: uuid.UUID, lease_until: dt.datetime, due_at: dt.datetime) -> None:
        """Give a claimed domain back unchecked (the process is stopping), due at ``due_at``."""
        self.db.execute("UPDATE domains SET next_check_at = ? WHERE id = ? AND next_check_at = ?",
                        [ts(due_at), uid(domain_id), ts(lease_until)])
        self.domains.forget([domain_id])

    def due(self, now: dt.datetime) -> tuple[int, dt.datetime | None]:
        """How many checks are due, and since when the oldest has been."""
        count, oldest = self.db.execute(
            "SELECT count(*), min(next_check_at) FROM domains WHERE next_check_at <= ?", [ts(now)]
        ).fetchone()
        return count, from_ts(oldest) if oldest else None

    def drifted(self) -> int:
        """Verified domains whose delegation or CAA a check found wrong."""
        [count] = self.db.execute("SELECT count(*) FROM domains WHERE drift IS NOT NULL").fetchone()
        return int(count)


#: The checks of ``domains_refresh_due`` (migration 19), in its own words so that SQLite uses it.
_REFRESH_DUE = " AND cert_status IN ('pending', 'renewing')"


def _turns(order: list[str], limit: int, room: Mapping[str, int]) -> dict[str, int]:
    """How many of ``limit`` checks each workspace gets: one each per round, in ``order``, while it
    has room."""
    left = {w: room[w] for w in order}
    shares = dict.fromkeys((w for w in order if left[w] > 0), 0)
    while limit and any(shares[w] < left[w] for w in shares):
        for w in shares:
            if limit and shares[w] < left[w]:
                shares[w] += 1
                limit -= 1
    return {w: n for w, n in shares.items() if n}
