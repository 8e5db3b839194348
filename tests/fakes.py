"""Test doubles for what cannot be real in a test: the passage of time."""

from __future__ import annotations

import datetime as dt

START = dt.datetime(2026, 11, 22, 10, 0, 0, tzinfo=dt.UTC)


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: dt.datetime = START) -> None:
        self.current = start

    def now(self) -> dt.datetime:
        return self.current

    def timestamp(self) -> float:
        return self.current.timestamp()

    def advance(self, seconds: float) -> None:
        self.current += dt.timedelta(seconds=seconds)
