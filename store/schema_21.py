"""Migration 21 on both backends: what the ACME client remembers of each hostname's failed
validations at each CA, and of each certificate's renewal information (core/acme/).

- ``acme_validations``: by CA and hostname, the validations the CA refused (in a row, and those of
  the last hour), what it said, and when the next order may go: the pacing that keeps a hostname
  inside the CA's failed-validation limits (core/acme/failures.py). Forgotten an hour after the
  last failure once a certificate was issued since.
- ``acme_certificates.ari_next_at``: when the CA's renewal window may be read again (its
  ``Retry-After``); ``acme_certificates.ari_explanation_url``: the page where the CA explains a
  window it moved (RFC 9773 ``explanationURL``).
"""

from __future__ import annotations

from store.postgres.schema_shared import T
from store.sqlite.schema_v1 import Migration

NAME = "failed ACME validations per hostname; the CA's renewal information kept"


def _statements(text: str) -> list[str]:
    return [
        f"""CREATE TABLE acme_validations (
            directory_url {text} NOT NULL,
            apex {text} NOT NULL,
            consecutive INTEGER NOT NULL,
            recent {text} NOT NULL,
            next_order_at {text},
            kind {text} NOT NULL,
            reason {text} NOT NULL,
            stopped {text},
            link {text},
            records {text},
            updated_at {text} NOT NULL,
            PRIMARY KEY (directory_url, apex)
        )""",
        "CREATE INDEX acme_validations_apex ON acme_validations(apex)",
        f"ALTER TABLE acme_certificates ADD COLUMN ari_next_at {text}",
        f"ALTER TABLE acme_certificates ADD COLUMN ari_explanation_url {text}",
    ]


SQLITE: Migration = (21, NAME, _statements("TEXT"))
POSTGRES: Migration = (21, NAME, _statements(T))
