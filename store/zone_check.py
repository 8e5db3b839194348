"""The last check of the delegation zone's delegation (migration 24; core/dns/zone_check.py):
one row, overwritten by each check, read by the diagnosis and ``/metrics`` of every process."""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs

from store._rows import from_ts, ts


@attrs.frozen
class ZoneCheckRow:
    zone: str
    state: str
    "``ok``, ``not_delegated``, ``other_nameservers``, ``lame`` or ``unknown`` (core/dns/zone_check.py)."
    message: str
    fix: str
    checked_at: dt.datetime


class ZoneCheckRepo:
    def __init__(self, db: Any) -> None:
        self.db = db

    def keep(self, check: ZoneCheckRow) -> None:
        """``check`` in place of the one before."""
        self.db.execute(
            """INSERT INTO delegation_zone_check (id, zone, state, message, fix, checked_at) VALUES (1, ?, ?, ?, ?, ?)
               ON CONFLICT (id) DO UPDATE SET zone = excluded.zone, state = excluded.state,
                   message = excluded.message, fix = excluded.fix, checked_at = excluded.checked_at""",
            [check.zone, check.state, check.message, check.fix, ts(check.checked_at)],
        )

    def last(self) -> ZoneCheckRow | None:
        row = self.db.execute(
            "SELECT zone, state, message, fix, checked_at FROM delegation_zone_check WHERE id = 1").fetchone()
        if row is None:
            return None
        zone, state, message, fix, checked_at = row
        return ZoneCheckRow(zone=zone, state=state, message=message, fix=fix, checked_at=from_ts(checked_at))
