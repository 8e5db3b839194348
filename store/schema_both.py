"""Migrations whose statements are the same on SQLite and PostgreSQL: one list, appended to both
(store/migrations.py, store/postgres/schema.py)."""

from __future__ import annotations

from store.sqlite.schema_v1 import Migration

BOTH: list[Migration] = [
    # Background checks claimed by workspaces in turn (store/lifecycle.py): the workspaces with a
    # due check, and each one's longest due, found by one index probe each.
    (16, "background checks by workspace in turn", [
        """CREATE INDEX domains_workspace_next_check ON domains(workspace_id, next_check_at)
           WHERE next_check_at IS NOT NULL""",
    ]),
]
