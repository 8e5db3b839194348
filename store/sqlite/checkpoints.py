"""WAL checkpoints off the request path.

SQLite copies the write-ahead log back into the database file (a checkpoint, with an fsync) inside
whichever commit crosses ``wal_autocheckpoint`` pages, so the request that happened to commit then
paid for everyone's writes: at 1M domains, every other bulk create of 500 took 10 ms more (53 ms
median, 44 without). The running service checkpoints from a thread and a connection of its own
instead; a commit still checkpoints past ``CEILING_PAGES``, should that thread ever fall behind.
"""

from __future__ import annotations

import sqlite3
import threading

#: The WAL size (4 KiB pages) at which a commit checkpoints by itself again: about 40 MB.
CEILING_PAGES = 10_000


class Checkpointer:
    """A connection that only checkpoints. PASSIVE: it never waits for readers or blocks writers,
    and copies what it can; the next run copies the rest."""

    def __init__(self, path: str) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout = 1000")
        self._lock = threading.Lock()  # run() in a worker thread, close() from the event loop's

    def run(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self._conn = None  # type: ignore[assignment]
