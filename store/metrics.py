"""The counts ``GET /metrics`` reports, read at scrape time (nothing is kept twice)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from store._rows import from_ts

if TYPE_CHECKING:
    from store.sqlite.connection import Database


class MetricsRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def webhook_queue(self) -> tuple[int, dt.datetime | None]:
        """Deliveries still to be made (queued or retrying), and when the oldest was queued."""
        count, oldest = self.db.execute(
            "SELECT count(*), min(created_at) FROM webhook_deliveries WHERE status = 'pending'"
        ).fetchone()
        return count, from_ts(oldest) if oldest else None

    def certificates_by_status(self) -> dict[str, int]:
        """Domains by the status of their certificate (``none`` before any)."""
        # The trigger-kept counters (store/migrations.py), not a scan of every domain.
        rows = self.db.execute("SELECT cert_status, sum(n) FROM domain_counts GROUP BY cert_status HAVING sum(n) > 0").fetchall()
        return dict(rows)

    def soonest_not_after(self) -> dt.datetime | None:
        """When the first serving certificate expires: active, or renewing (the current one still
        serves until the new one is deployed, and a renewal that stalls is what the alert is for)."""
        [value] = self.db.execute(
            "SELECT min(cert_not_after) FROM domains WHERE cert_status IN ('active', 'renewing')"
        ).fetchone()
        return from_ts(value) if value else None
