"""One-click DNS set-up: what a domain's DNS host offers (a JSON column of ``domains``) and the
one-use states of the set-ups started, kept as hashes: a state in a URL is a capability."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import TYPE_CHECKING, Any, cast

import attrs

from store._rows import from_ts, postgres, select, ts, uid
from store.records import DnsHostSeen, OneClickOffer, OneClickStart

if TYPE_CHECKING:
    from store.postgres.pool import PgDb
    from store.sqlite.connection import Database

#: ``offer`` in the JSON when whether one is offered is not known. Kept in the offer's own key, so
#: that turning one-click set-up off forgets it with the offers, through that key's index.
UNKNOWN = "unknown"


def dns_host_json(seen: DnsHostSeen | None) -> str | None:
    if seen is None:
        return None
    offer = attrs.asdict(seen.offer) if seen.offer else UNKNOWN if seen.offer_unknown else None
    return json.dumps({"zone": seen.zone, "host": seen.host, "checked_at": ts(seen.checked_at),
                       "offer": offer, "problem": seen.problem})


def dns_host_from_json(text: str | None) -> DnsHostSeen | None:
    if not text:
        return None
    data = json.loads(text)
    offer = OneClickOffer(**data["offer"]) if isinstance(data["offer"], dict) else None
    return DnsHostSeen(zone=data["zone"], host=data["host"], checked_at=from_ts(data["checked_at"]), offer=offer,
                       problem=data["problem"], offer_unknown=data["offer"] == UNKNOWN)


class OneClickRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(self, start: OneClickStart) -> None:
        self.db.execute(
            """INSERT INTO one_click_starts (state_hash, workspace_id, domain_id, created_at, expires_at, started_by, used_at)
               VALUES (?, ?, ?, ?, ?, ?, ?)""",
            [start.state_hash, uid(start.workspace_id), uid(start.domain_id), ts(start.created_at),
             ts(start.expires_at), start.started_by, ts(start.used_at)],
        )

    def use(self, state_hash: str, now: dt.datetime) -> OneClickStart | None:
        """The start this state belongs to, marked used; None when unknown, used before or expired."""
        cursor = self.db.execute(
            "UPDATE one_click_starts SET used_at = ? WHERE state_hash = ? AND used_at IS NULL AND expires_at > ?",
            [ts(now), state_hash, ts(now)],
        )
        if cursor.rowcount != 1:
            return None
        r = select(self.db, "SELECT * FROM one_click_starts WHERE state_hash = ?", [state_hash])[0]
        return OneClickStart(state_hash=r["state_hash"], workspace_id=uuid.UUID(r["workspace_id"]),
                             domain_id=uuid.UUID(r["domain_id"]), created_at=from_ts(r["created_at"]),
                             expires_at=from_ts(r["expires_at"]),
                             started_by=r["started_by"], used_at=from_ts(r["used_at"]))

    def forget_offers(self) -> int:
        """Drop every domain's one-click offer, known or unknown (at start-up with one-click set-up
        off, before any domain is read: the domain rows cached in memory are not touched).

        PostgreSQL keeps no statistics of the offer's expression, so its planner takes nearly every
        row to have one and scans the table rather than the partial index of the rows that do:
        0.22 s of every start-up at 1M domains, before the first answer (issue 49). With sequential
        scans off for this one statement it reads the index."""
        if not postgres(self.db):
            return self.db.execute(
                "UPDATE domains SET dns_host = json_set(dns_host, '$.offer', json('null')) "
                "WHERE json_extract(dns_host, '$.offer') IS NOT NULL"
            ).rowcount
        pg: PgDb = cast(Any, self.db)
        with pg.connection() as conn:
            conn.execute("SET enable_seqscan = off")
            try:
                return int(conn.execute(
                    """UPDATE domains SET dns_host = (dns_host::jsonb || '{"offer": null}')::text
                       WHERE (dns_host::jsonb ->> 'offer') IS NOT NULL"""
                ).rowcount)
            finally:
                conn.execute("RESET enable_seqscan")

    def purge(self, *, expired_before: dt.datetime) -> int:
        return self.db.execute("DELETE FROM one_click_starts WHERE expires_at < ?", [ts(expired_before)]).rowcount
