"""The validations each CA refused, by hostname (migration 21): what core/acme/failures.py paces
new orders by, so that a hostname stays inside the CA's failed-validation limits."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

import attrs

from store._rows import from_ts, select, ts

if TYPE_CHECKING:
    from store.sqlite.connection import Database


@attrs.frozen
class AcmeValidations:
    """One hostname's failed validations at one CA."""

    directory_url: str
    apex: str
    consecutive: int
    "Validations refused in a row (none since issued)."
    recent: tuple[dt.datetime, ...]
    "When the validations of the last hour were refused, oldest first: the CA's hourly limit counts them."
    kind: str
    "What the last refusal was about (core/acme/problems.py): ``nxdomain``, ``wrong_value``, ``caa``, ``paused`` ..."
    reason: str
    "The last refusal, in a customer's words."
    updated_at: dt.datetime
    next_order_at: dt.datetime | None = None
    "No order for the hostname at this CA before then."
    stopped: str | None = None
    "``failures`` (too many in a row) or ``paused`` (by the CA): no order until the records change or a person asks."
    link: str | None = None
    "The CA's page to unpause the hostname (``paused``)."
    records: str | None = None
    "What the hostname's DNS looked like when ordering stopped: a change lets orders go again."


def _row(v: AcmeValidations) -> list[Any]:
    return [v.directory_url, v.apex, v.consecutive, json.dumps([ts(t) for t in v.recent]), ts(v.next_order_at),
            v.kind, v.reason, v.stopped, v.link, v.records, ts(v.updated_at)]


_COLUMNS = ("directory_url", "apex", "consecutive", "recent", "next_order_at", "kind", "reason", "stopped", "link",
            "records", "updated_at")


def _validations(r: dict[str, Any]) -> AcmeValidations:
    return AcmeValidations(
        directory_url=r["directory_url"], apex=r["apex"], consecutive=int(r["consecutive"]),
        recent=tuple(from_ts(t) for t in json.loads(r["recent"])), next_order_at=from_ts(r["next_order_at"]),
        kind=r["kind"], reason=r["reason"], stopped=r["stopped"], link=r["link"], records=r["records"],
        updated_at=from_ts(r["updated_at"]),
    )


class AcmeValidationRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, directory_url: str, apex: str) -> AcmeValidations | None:
        rows = select(self.db, "SELECT * FROM acme_validations WHERE directory_url = ? AND apex = ?",
                      [directory_url, apex])
        return _validations(rows[0]) if rows else None

    def of_hostname(self, apex: str) -> list[AcmeValidations]:
        """At every CA, the last refused first."""
        rows = select(self.db, "SELECT * FROM acme_validations WHERE apex = ? ORDER BY updated_at DESC", [apex])
        return [_validations(r) for r in rows]

    def put(self, validations: AcmeValidations) -> None:
        names = ", ".join(_COLUMNS)
        updates = ", ".join(f"{name} = excluded.{name}" for name in _COLUMNS[2:])
        self.db.execute(
            f"INSERT INTO acme_validations ({names}) VALUES ({', '.join('?' for _ in _COLUMNS)}) "
            f"ON CONFLICT (directory_url, apex) DO UPDATE SET {updates}",
            _row(validations),
        )

    def delete(self, directory_url: str, apex: str) -> None:
        self.db.execute("DELETE FROM acme_validations WHERE directory_url = ? AND apex = ?", [directory_url, apex])
