"""Migration 27 on both backends: an ACME account's key rollover (RFC 8555 section 7.3.5) kept
safe if it stops half-way (core/acme/rollover.py).

- ``acme_accounts.pending_key_ciphertext``: the new key of a rollover under way, encrypted as the
  account's key is, written before the CA is asked to change keys. Once the CA took it, it becomes
  the account's key; a CA that refused it sees it dropped. A rollover that stopped between the
  two (the CA took the key, the database did not record it) leaves it here, so the key the CA now
  holds is never lost: a process refused with the old key tries it, and the command run again
  asks the CA which key it holds and finishes.
"""

from __future__ import annotations

from store.postgres.schema_shared import T
from store.sqlite.schema_v1 import Migration

NAME = "an ACME account's key rollover under way"


def _statements(text: str) -> list[str]:
    return [f"ALTER TABLE acme_accounts ADD COLUMN pending_key_ciphertext {text}"]


SQLITE: Migration = (27, NAME, _statements("TEXT"))
POSTGRES: Migration = (27, NAME, _statements(T))
