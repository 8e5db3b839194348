"""Migration 23 on both backends: the delegation zone as a zone, with a serial that every change
moves and a journal of the changes, so that its servers answer from memory and secondaries are
kept by IXFR (core/delegation_dns/).

- ``delegation_zone``: one row, the zone's SOA serial (RFC 1982 arithmetic: kept as a count, served
  modulo 2**32), started at the time the migration ran so that it stays above the time-based
  serials served before; ``journal_from``: the oldest serial the journal still leads on from.
- ``delegation_zone_changes``: each value added or removed, under the serial the change made.
- ``delegation_zone_servers``: each process's server, the serial it answers from and when it
  said so: a value is confirmed at every server once each live one answers from its serial.
- ``acme_challenges.order_url``, ``published_at``: which order a value answers, and since when, so
  that a value whose order is over is withdrawn, and a pile of values explained; an index on
  ``acme_certificates.order_url`` finds whether an order is still under way.
"""

from __future__ import annotations

from store.postgres.schema_shared import T
from store.sqlite.schema_v1 import Migration

NAME = "the delegation zone's serial, journal and servers"


def _statements(text: str, now_seconds: str) -> list[str]:
    return [
        """CREATE TABLE delegation_zone (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            serial BIGINT NOT NULL,
            journal_from BIGINT NOT NULL
        )""",
        f"INSERT INTO delegation_zone (id, serial, journal_from) VALUES (1, {now_seconds}, {now_seconds})",
        f"""CREATE TABLE delegation_zone_changes (
            serial BIGINT NOT NULL,
            name {text} NOT NULL,
            value {text} NOT NULL,
            added INTEGER NOT NULL,
            changed_at {text} NOT NULL
        )""",
        "CREATE INDEX delegation_zone_changes_serial ON delegation_zone_changes(serial)",
        f"""CREATE TABLE delegation_zone_servers (
            process {text} PRIMARY KEY,
            serial BIGINT NOT NULL,
            seen_at {text} NOT NULL
        )""",
        f"ALTER TABLE acme_challenges ADD COLUMN order_url {text}",
        f"ALTER TABLE acme_challenges ADD COLUMN published_at {text}",
        "CREATE INDEX acme_certificates_order ON acme_certificates(order_url) WHERE order_url IS NOT NULL",
    ]


SQLITE: Migration = (23, NAME, _statements("TEXT", "CAST(strftime('%s', 'now') AS INTEGER)"))
POSTGRES: Migration = (23, NAME, _statements(T, "CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)"))
