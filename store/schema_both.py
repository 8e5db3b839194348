"""Migrations whose statements are the same on SQLite and PostgreSQL, appended to both lists
(store/sqlite/schema.py, store/postgres/schema.py) in their order."""

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

#: The local trial's stand-ins (store/stand_ins.py): the records the simulated DNS host applied, and
#: the development identity provider's unredeemed codes, kept where every process reads them.
STAND_INS: Migration = (18, "development stand-ins: simulated DNS host records, sign-in codes", [
    """CREATE TABLE simulated_dns_records (
        name TEXT NOT NULL,
        rtype TEXT NOT NULL,
        value TEXT NOT NULL,
        applied_at TEXT NOT NULL,
        PRIMARY KEY (name, rtype)
    )""",
    """CREATE TABLE dev_idp_codes (
        code_hash TEXT PRIMARY KEY,
        email TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        challenge TEXT NOT NULL,
        nonce TEXT,
        expires_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX dev_idp_codes_expiry ON dev_idp_codes(expires_at)",
])
