"""Migration 25 on both backends: the certificate profile (ACME profiles, draft-ietf-acme-profiles)
each certificate was issued under, as the CA's order said, so the portal and the API can say
whether a hostname has a six-day certificate or the CA's default.

- ``acme_certificates.profile``: the profile of the certificate served (core/acme/orders.py);
- ``certificates.profile``: the same, as the Certificate shows it (``profile``, beyond the spec).
"""

from __future__ import annotations

from store.postgres.schema_shared import T
from store.sqlite.schema_v1 import Migration

NAME = "the ACME profile each certificate was issued under"


def _statements(text: str) -> list[str]:
    return [
        f"ALTER TABLE acme_certificates ADD COLUMN profile {text}",
        f"ALTER TABLE certificates ADD COLUMN profile {text}",
    ]


SQLITE: Migration = (25, NAME, _statements("TEXT"))
POSTGRES: Migration = (25, NAME, _statements(T))
