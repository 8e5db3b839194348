"""Rows read by id, kept in a bounded map (the oldest kept goes first): a domain read by id again
costs no query.

On SQLite the service is the only writer and every write of its own drops the rows it wrote, so
what is kept is exact. On PostgreSQL other processes write too: each tells the others what it
changed (a trigger's ``NOTIFY``, store/postgres/schema_shared.py), and rows are kept and served only
while this process is listening (``live``). Lookups and fills run on the event loop and in units
of work's threads at once, hence the lock.

A row read before a write committed must not be kept after the write dropped it: every drop
moves ``generation`` on, and a fill brings the generation it saw before its read (``seen``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class RowCache(Generic[K, V]):
    def __init__(self, size: int, live: Callable[[], bool] = lambda: True) -> None:
        self.size = size
        self.live = live
        "Whether kept rows are exact now (on PostgreSQL: whether other processes' changes are heard)."
        self.generation = 0
        self._rows: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        if not self.live():
            return None
        return self._rows.get(key)

    def seen(self) -> int | None:
        """Taken before reading a row to ``fill`` with; None while rows cannot be kept."""
        return self.generation if self.live() else None

    def fill(self, key: K, row: V, seen: int | None) -> None:
        """Keep a row read after ``seen()``, unless something was dropped since."""
        with self._lock:
            if seen is None or seen != self.generation:
                return
            self._rows[key] = row
            self._rows.move_to_end(key)
            if len(self._rows) > self.size:
                self._rows.popitem(last=False)

    def forget(self, keys: Iterable[K]) -> None:
        with self._lock:
            self.generation += 1
            for key in keys:
                self._rows.pop(key, None)

    def forget_all(self) -> None:
        with self._lock:
            self.generation += 1
            self._rows.clear()
