"""Migration 17, on both backends: what the service keeps as an ACME client and as the
authoritative server of the delegation zone (core/acme/, core/delegation_dns/).

- ``acme_accounts``: one account per CA directory, its key encrypted with the service's key.
- ``acme_certificates``: each certificate the service ordered, by the provider's handle (the
  Certificate's ``providerHostnameId``): the order under way, the chain issued and its key
  (encrypted), when to renew it. A renewal replaces chain and key in place.
- ``acme_challenges``: the DNS-01 TXT values the built-in server answers, until they expire.
- ``domains.cert_renew_at``: when the provider means to renew the certificate (the schedule looks then).
"""

from __future__ import annotations

from store.postgres.schema_shared import T
from store.sqlite.schema_v1 import Migration


def _statements(text: str) -> list[str]:
    return [
        f"""CREATE TABLE acme_accounts (
            directory_url {text} PRIMARY KEY,
            account_url {text} NOT NULL,
            key_ciphertext {text} NOT NULL,
            created_at {text} NOT NULL
        )""",
        f"""CREATE TABLE acme_certificates (
            handle {text} PRIMARY KEY,
            apex {text} NOT NULL,
            directory_url {text} NOT NULL,
            status {text} NOT NULL,
            order_url {text},
            order_key_ciphertext {text},
            replaces {text},
            chain_pem {text},
            key_ciphertext {text},
            not_before {text},
            not_after {text},
            renew_at {text},
            ari_checked_at {text},
            error {text},
            created_at {text} NOT NULL,
            updated_at {text} NOT NULL
        )""",
        # The certificate served for a hostname: its newest issued one.
        "CREATE INDEX acme_certificates_served ON acme_certificates(apex, not_after) WHERE chain_pem IS NOT NULL",
        "CREATE INDEX acme_certificates_updated ON acme_certificates(updated_at)",
        f"""CREATE TABLE acme_challenges (
            name {text} NOT NULL,
            value {text} NOT NULL,
            expires_at {text} NOT NULL,
            PRIMARY KEY (name, value)
        )""",
        "CREATE INDEX acme_challenges_expiry ON acme_challenges(expires_at)",
        # When the provider itself means to renew the domain's certificate (ACME: inside the CA's
        # renewal window): the background checks look then.
        f"ALTER TABLE domains ADD COLUMN cert_renew_at {text}",
    ]


ACME_SQLITE: Migration = (17, "ACME accounts, certificates and challenges", _statements("TEXT"))
ACME_PG: Migration = (17, "ACME accounts, certificates and challenges", _statements(T))
