"""What the service keeps as an ACME client (core/acme/) and serves as the authoritative server of
the delegation zone (core/delegation_dns/): accounts, certificates with their encrypted keys, and
the DNS-01 challenge values. Keys are stored encrypted (core/crypto.py) and never leave through
the API; the TLS terminator endpoints (core/tls_terminator/) read them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs
import sqlite_utils

from store._rows import from_ts, select, ts

#: The purposes keys are encrypted for (``Keyring.encrypt(purpose, pem_or_jwk, bound_to=...)``):
#: a certificate's key bound to its handle, an account's key bound to its directory URL.
CERTIFICATE_KEY = "acme-certificate-key"
ACCOUNT_KEY = "acme-account-key"


@attrs.frozen
class AcmeAccount:
    directory_url: str
    account_url: str
    key_ciphertext: str
    "The account's private key (JWK JSON), encrypted with the service's key, bound to the directory URL."
    created_at: dt.datetime


@attrs.frozen
class AcmeCertificate:
    """One certificate the service orders and renews for one hostname, by the provider's handle."""

    handle: str
    "The provider's id of it (the Certificate's ``providerHostnameId``)."
    apex: str
    directory_url: str
    "The CA that issued it, or is issuing it."
    status: str
    "``pending`` (an order under way, nothing issued yet), ``valid`` (issued) or ``invalid`` (the order failed)."
    created_at: dt.datetime
    updated_at: dt.datetime
    order_url: str | None = None
    "The order under way (a first issuance or a renewal); None when none is."
    order_key_ciphertext: str | None = None
    "The private key (PEM) of the order under way, encrypted: its CSR's, kept across restarts."
    replaces: str | None = None
    "The ARI id (RFC 9773) of the certificate the order under way replaces."
    chain_pem: str | None = None
    "The issued certificate and its chain, leaf first; None until issued."
    key_ciphertext: str | None = None
    "The issued certificate's private key (PEM), encrypted."
    not_before: dt.datetime | None = None
    not_after: dt.datetime | None = None
    renew_at: dt.datetime | None = None
    "When to renew: inside the CA's renewal window (ARI), or at two thirds of its lifetime."
    ari_checked_at: dt.datetime | None = None
    error: str | None = None
    "Why the last order failed: the CA's refusal in a customer's words (core/acme/problems.py)."
    ari_next_at: dt.datetime | None = None
    "When the CA's renewal window may be read again: its ``Retry-After``."
    ari_explanation_url: str | None = None
    "Where the CA explains the renewal window it suggests (RFC 9773 ``explanationURL``), when it gives one."


_COLUMNS = [field.name for field in attrs.fields(AcmeCertificate)]
_TIMES = {"created_at", "updated_at", "not_before", "not_after", "renew_at", "ari_checked_at", "ari_next_at"}


def _row(certificate: AcmeCertificate) -> list[Any]:
    return [ts(getattr(certificate, name)) if name in _TIMES else getattr(certificate, name) for name in _COLUMNS]


def _certificate(r: dict[str, Any]) -> AcmeCertificate:
    return AcmeCertificate(**{name: from_ts(r[name]) if name in _TIMES else r[name] for name in _COLUMNS})


class AcmeRepo:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    # -- accounts ------------------------------------------------------------------------------

    def account(self, directory_url: str) -> AcmeAccount | None:
        rows = select(self.db, "SELECT * FROM acme_accounts WHERE directory_url = ?", [directory_url])
        if not rows:
            return None
        r = rows[0]
        return AcmeAccount(directory_url=r["directory_url"], account_url=r["account_url"],
                           key_ciphertext=r["key_ciphertext"], created_at=from_ts(r["created_at"]))

    def add_account(self, account: AcmeAccount) -> AcmeAccount:
        """Keep ``account``, unless another process kept one for the same CA first: the one kept."""
        self.db.execute(
            """INSERT INTO acme_accounts (directory_url, account_url, key_ciphertext, created_at) VALUES (?, ?, ?, ?)
               ON CONFLICT (directory_url) DO NOTHING""",
            [account.directory_url, account.account_url, account.key_ciphertext, ts(account.created_at)],
        )
        kept = self.account(account.directory_url)
        assert kept is not None
        return kept

    # -- certificates --------------------------------------------------------------------------

    def certificate(self, handle: str) -> AcmeCertificate | None:
        rows = select(self.db, "SELECT * FROM acme_certificates WHERE handle = ?", [handle])
        return _certificate(rows[0]) if rows else None

    def put(self, certificate: AcmeCertificate) -> None:
        """Insert or replace the certificate kept under its handle."""
        names = ", ".join(_COLUMNS)
        updates = ", ".join(f"{name} = excluded.{name}" for name in _COLUMNS if name != "handle")
        self.db.execute(
            f"INSERT INTO acme_certificates ({names}) VALUES ({', '.join('?' for _ in _COLUMNS)}) "
            f"ON CONFLICT (handle) DO UPDATE SET {updates}",
            _row(certificate),
        )

    def delete(self, handle: str) -> None:
        self.db.execute("DELETE FROM acme_certificates WHERE handle = ?", [handle])

    def served(self, apex: str) -> AcmeCertificate | None:
        """The certificate a TLS terminator serves for ``apex``: its newest issued one."""
        rows = select(self.db, """SELECT * FROM acme_certificates WHERE apex = ? AND chain_pem IS NOT NULL
                                  ORDER BY not_after DESC LIMIT 1""", [apex])
        return _certificate(rows[0]) if rows else None

    def all_served(self) -> list[AcmeCertificate]:
        """The newest issued certificate of every hostname (the TLS terminator's files)."""
        rows = select(self.db, """SELECT * FROM acme_certificates c WHERE chain_pem IS NOT NULL AND NOT EXISTS (
                                      SELECT 1 FROM acme_certificates n WHERE n.apex = c.apex
                                      AND n.chain_pem IS NOT NULL AND n.not_after > c.not_after)""")
        return [_certificate(r) for r in rows]

    def last_change(self) -> tuple[str | None, int]:
        """The latest ``updated_at`` and the number of certificates: what changes when one does."""
        last, count = self.db.execute("SELECT max(updated_at), count(*) FROM acme_certificates").fetchone()
        return last, int(count)

    def unreferenced(self, created_before: dt.datetime) -> list[AcmeCertificate]:
        """Certificates no Certificate record names any more (their domain was deleted), older than
        ``created_before`` (a new order's record is stored just after it is placed)."""
        rows = select(self.db, """SELECT * FROM acme_certificates a WHERE created_at < ? AND NOT EXISTS (
                                      SELECT 1 FROM certificates c WHERE c.provider_hostname_id = a.handle)""",
                      [ts(created_before)])
        return [_certificate(r) for r in rows]

    # -- DNS-01 challenges ----------------------------------------------------------------------

    def add_challenge(self, name: str, value: str, expires_at: dt.datetime) -> None:
        self.db.execute(
            """INSERT INTO acme_challenges (name, value, expires_at) VALUES (?, ?, ?)
               ON CONFLICT (name, value) DO UPDATE SET expires_at = excluded.expires_at""",
            [name.lower(), value, ts(expires_at)],
        )

    def remove_challenge(self, name: str, value: str) -> None:
        self.db.execute("DELETE FROM acme_challenges WHERE name = ? AND value = ?", [name.lower(), value])

    def challenges(self, name: str, now: dt.datetime) -> list[str]:
        """The TXT values live at ``name``."""
        rows = self.db.execute("SELECT value FROM acme_challenges WHERE name = ? AND expires_at > ? ORDER BY value",
                               [name.lower(), ts(now)]).fetchall()
        return [value for (value,) in rows]

    def purge_challenges(self, now: dt.datetime) -> int:
        return int(self.db.execute("DELETE FROM acme_challenges WHERE expires_at <= ?", [ts(now)]).rowcount)
