"""Migration 24 on both backends: the last check of the delegation zone's own delegation
(core/dns/zone_check.py), kept so that every process says the same: the check at start-up and the
daily checks write it, the diagnosis and ``/metrics`` of any process read it (check-config writes
nothing: it only prints its own).

- ``delegation_zone_check``: one row, the zone checked, its state (``ok``, ``not_delegated``,
  ``other_nameservers``, ``lame``, ``unknown``), what DNS said and the fix, and when.
"""

from __future__ import annotations

from store.postgres.schema_shared import T
from store.sqlite.schema_v1 import Migration

NAME = "the last check of the delegation zone's delegation"


def _statements(text: str) -> list[str]:
    return [
        f"""CREATE TABLE delegation_zone_check (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            zone {text} NOT NULL,
            state {text} NOT NULL,
            message {text} NOT NULL,
            fix {text} NOT NULL,
            checked_at {text} NOT NULL
        )""",
    ]


SQLITE: Migration = (24, NAME, _statements("TEXT"))
POSTGRES: Migration = (24, NAME, _statements(T))
