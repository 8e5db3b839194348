"""Migration 26 on both backends: the chain a certificate is served with, and the expiry notice
([lifecycle] events = "transitions"; core/certificates/events.py).

- ``certificates.previous_issuer``: the intermediate that issued the certificate before its latest
  renewal, when that renewal came from another one (the CA picks an intermediate per issuance);
  NULL while the intermediate has not changed.
- ``certificates.overdue_announced_for``: the provider's id of the certificate whose passing two
  thirds of its life without a successor was announced (``cert.renewal_overdue``), so it is
  announced once per certificate; its successor may be announced in its turn.
- ``domains.cert_previous_issuer``: the previous intermediate of the domain's latest certificate,
  as ``cert_issuer`` mirrors its issuer: the portal says "issued by X (was Y)".
"""

from __future__ import annotations

from store.postgres.schema_shared import T
from store.sqlite.schema_v1 import Migration

NAME = "the intermediate a certificate was issued by before its renewal; the expiry notice sent"


def _statements(text: str) -> list[str]:
    return [
        f"ALTER TABLE certificates ADD COLUMN previous_issuer {text}",
        f"ALTER TABLE certificates ADD COLUMN overdue_announced_for {text}",
        f"ALTER TABLE domains ADD COLUMN cert_previous_issuer {text}",
    ]


SQLITE: Migration = (26, NAME, _statements("TEXT"))
POSTGRES: Migration = (26, NAME, _statements(T))
