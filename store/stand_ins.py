"""What the development stand-ins of a local trial keep (README, "First steps"): the records the
simulated DNS host applied (core/domain_connect/simulated.py), which the simulated DNS answers,
and the development identity provider's unredeemed codes (core/identity/dev_idp.py).

Both live in the database, on SQLite as on PostgreSQL, so that every process on one database sees
them: a code issued by one process is redeemed by whichever process the token request reaches,
and a record applied through one process is seen by the background checks of all.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from store._rows import postgres, select, ts


class StandInRepo:
    def __init__(self, db: Any) -> None:
        self.db = db

    # --- the simulated DNS host's records ------------------------------------------------------

    def apply_record(self, name: str, rtype: str, value: str, now: dt.datetime) -> None:
        """One record at ``name``, replacing the one of its type there (as the template asks of a
        DNS host: a new token replaces an old one)."""
        self.db.execute(
            """INSERT INTO simulated_dns_records (name, rtype, value, applied_at) VALUES (?, ?, ?, ?)
               ON CONFLICT (name, rtype) DO UPDATE SET value = excluded.value, applied_at = excluded.applied_at""",
            [name, rtype, value, ts(now)],
        )

    def records_at(self, name: str) -> dict[str, str]:
        """The applied records at ``name``, by type."""
        rows = select(self.db, "SELECT rtype, value FROM simulated_dns_records WHERE name = ?", [name])
        return {r["rtype"]: r["value"] for r in rows}

    # --- the development identity provider's codes ---------------------------------------------

    def keep_code(self, code_hash: str, fields: dict[str, Any], *, now: float, at_most: int) -> None:
        """A new code, after dropping the expired ones and, when ``at_most`` are kept, the oldest."""
        self.db.execute("DELETE FROM dev_idp_codes WHERE expires_at < ?", [now])
        self.db.execute(
            f"""DELETE FROM dev_idp_codes WHERE code_hash IN (
                    SELECT code_hash FROM dev_idp_codes ORDER BY expires_at DESC, code_hash
                    {"" if postgres(self.db) else "LIMIT -1"} OFFSET ?)""",
            [at_most - 1],
        )
        self.db.execute(
            """INSERT INTO dev_idp_codes (code_hash, email, redirect_uri, challenge, nonce, expires_at)
               VALUES (?, ?, ?, ?, ?, ?)""",
            [code_hash, fields["email"], fields["redirect_uri"], fields["challenge"], fields["nonce"],
             fields["expires"]],
        )

    def take_code(self, code_hash: str) -> dict[str, Any] | None:
        """The code's fields, the code gone with this read (used once, by whichever process asks first)."""
        rows = select(self.db, """DELETE FROM dev_idp_codes WHERE code_hash = ?
                                  RETURNING email, redirect_uri, challenge, nonce, expires_at AS expires""", [code_hash])
        return rows[0] if rows else None

    def count_codes(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM dev_idp_codes").fetchone()[0])
