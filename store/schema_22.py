"""Migration 22 on both backends: a hostname's certificate served to the workspace that proves
ownership now, and a deleted domain's certificate gone at once (core/acme/, core/tls_terminator/).

- ``acme_certificates.deleted_at``: set, with ``updated_at``, in the transaction that deletes the
  domain whose Certificate records named it. The TLS terminator's index sees the change at its
  next look (``updated_at``), and the revoke job revokes the certificate at its next run, without
  the grace an unnamed certificate gets (a new order's record is stored just after the order).
- ``domains.verified_at``: when the domain last became verified. Two workspaces' domains verified
  for one hostname (the customer moved, and the old workspace has not checked again yet): the
  certificate of the one verified last is served. NULL for domains verified before: the oldest.
- ``certificates_provider_hostname``: the Certificate records naming a provider's handle, which
  the served certificates and the revoke job look up for every ACME certificate.
- ``domains_verified_apex``: every workspace's verified domain for a hostname, asked when another
  workspace verifies it (those are checked again at once: core/verification/checks.py).
"""

from __future__ import annotations

from store.postgres.schema_shared import T
from store.sqlite.schema_v1 import Migration

NAME = "certificates served to the workspace proving ownership now; deletions seen at once"


def _statements(text: str) -> list[str]:
    return [
        f"ALTER TABLE acme_certificates ADD COLUMN deleted_at {text}",
        "CREATE INDEX acme_certificates_deleted ON acme_certificates(deleted_at) WHERE deleted_at IS NOT NULL",
        f"ALTER TABLE domains ADD COLUMN verified_at {text}",
        """CREATE INDEX certificates_provider_hostname ON certificates(provider_hostname_id)
           WHERE provider_hostname_id IS NOT NULL""",
        "CREATE INDEX domains_verified_apex ON domains(apex) WHERE validation_status = 'verified'",
    ]


SQLITE: Migration = (22, NAME, _statements("TEXT"))
POSTGRES: Migration = (22, NAME, _statements(T))
