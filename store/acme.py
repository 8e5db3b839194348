"""What the service keeps as an ACME client (core/acme/) and serves as the authoritative server of
the delegation zone (core/delegation_dns/): accounts, certificates with their encrypted keys, and
the DNS-01 challenge values. Keys are stored encrypted (core/crypto.py) and never leave through
the API; the TLS terminator endpoints (core/tls_terminator/) read them."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

import attrs

from store._rows import from_ts, select, ts, uid

if TYPE_CHECKING:
    from store.sqlite.connection import Database

#: The purposes keys are encrypted for (``Keyring.encrypt(purpose, pem_or_jwk, bound_to=...)``):
#: a certificate's key bound to its handle, an account's key bound to its directory URL.
CERTIFICATE_KEY = "acme-certificate-key"
ACCOUNT_KEY = "acme-account-key"


@attrs.frozen
class AcmeAccount:
    directory_url: str
    account_url: str
    key_ciphertext: str
    "The account's private key (PEM), encrypted with the service's key, bound to the directory URL."
    created_at: dt.datetime
    pending_key_ciphertext: str | None = None
    """The new key of a key rollover under way or left half-way (core/acme/rollover.py), encrypted
    as ``key_ciphertext`` is; None when none is."""


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
    profile: str | None = None
    "The profile the certificate served was issued under, as its order said (ACME profiles); None: the CA's default."
    deleted_at: dt.datetime | None = None
    """When the domain whose Certificate records named it was deleted: served no more, revoked at
    the revoke job's next run (core/acme/upkeep.py). Set by ``mark_deleted`` only; ``put`` keeps it."""


_COLUMNS = [field.name for field in attrs.fields(AcmeCertificate)]
_TIMES = {"created_at", "updated_at", "not_before", "not_after", "renew_at", "ari_checked_at", "ari_next_at",
          "deleted_at"}
#: Written by ``put`` over a kept row: all but the handle, and the deletion mark, which only a deletion sets.
_REPLACED = [name for name in _COLUMNS if name not in ("handle", "deleted_at")]
#: A certificate ``a`` and a Certificate record of a verified domain naming it: the workspaces
#: proving ownership of its hostname now.
_OWNED = """acme_certificates a JOIN certificates c ON c.provider_hostname_id = a.handle
            JOIN domains d ON d.id = c.domain_id AND d.validation_status = 'verified'"""


def _row(certificate: AcmeCertificate) -> list[Any]:
    return [ts(getattr(certificate, name)) if name in _TIMES else getattr(certificate, name) for name in _COLUMNS]


def _certificate(r: dict[str, Any]) -> AcmeCertificate:
    return AcmeCertificate(**{name: from_ts(r[name]) if name in _TIMES else r[name] for name in _COLUMNS})


def _choose(candidates: list[tuple[str, AcmeCertificate]]) -> dict[str, AcmeCertificate]:
    """By hostname: the certificate whose domain was verified last, then the one expiring last."""
    chosen: dict[str, tuple[tuple[str, str], AcmeCertificate]] = {}
    for verified_at, certificate in candidates:
        rank = (verified_at, ts(certificate.not_after) or "")
        if certificate.apex not in chosen or rank > chosen[certificate.apex][0]:
            chosen[certificate.apex] = (rank, certificate)
    return {apex: certificate for apex, (_, certificate) in chosen.items()}


class AcmeRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- accounts ------------------------------------------------------------------------------

    def account(self, directory_url: str) -> AcmeAccount | None:
        rows = select(self.db, "SELECT * FROM acme_accounts WHERE directory_url = ?", [directory_url])
        if not rows:
            return None
        r = rows[0]
        return AcmeAccount(directory_url=r["directory_url"], account_url=r["account_url"],
                           key_ciphertext=r["key_ciphertext"], created_at=from_ts(r["created_at"]),
                           pending_key_ciphertext=r["pending_key_ciphertext"])

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

    def begin_key_change(self, directory_url: str, key_ciphertext: str) -> bool:
        """Keep ``key_ciphertext`` as the account's pending key, before the CA is asked to take it:
        whatever happens next, the key the CA may hold is in the database. False when another
        rollover's key is pending already (or no account is kept)."""
        return bool(self.db.execute(
            """UPDATE acme_accounts SET pending_key_ciphertext = ?
               WHERE directory_url = ? AND pending_key_ciphertext IS NULL""",
            [key_ciphertext, directory_url]).rowcount)

    def finish_key_change(self, directory_url: str, key_ciphertext: str) -> None:
        """The CA holds ``key_ciphertext``'s key now: it becomes the account's key, the old one is
        overwritten (forgotten), and it is pending no more. Written whatever is pending meanwhile:
        the CA holds this key, whatever another rollover wrote."""
        self.db.execute(
            """UPDATE acme_accounts SET key_ciphertext = ?,
                   pending_key_ciphertext = CASE WHEN pending_key_ciphertext = ? THEN NULL
                                                 ELSE pending_key_ciphertext END
               WHERE directory_url = ?""",
            [key_ciphertext, key_ciphertext, directory_url])

    def drop_pending_key(self, directory_url: str, key_ciphertext: str) -> None:
        """The CA does not hold the pending key ``key_ciphertext``: it goes (another's stays)."""
        self.db.execute(
            "UPDATE acme_accounts SET pending_key_ciphertext = NULL WHERE directory_url = ? AND pending_key_ciphertext = ?",
            [directory_url, key_ciphertext])

    # -- certificates --------------------------------------------------------------------------

    def certificate(self, handle: str) -> AcmeCertificate | None:
        rows = select(self.db, "SELECT * FROM acme_certificates WHERE handle = ?", [handle])
        return _certificate(rows[0]) if rows else None

    def put(self, certificate: AcmeCertificate) -> None:
        """Insert or replace the certificate kept under its handle. A deletion mark stays: an order
        finished after its domain was deleted is stored, but never served, and revoked."""
        names = ", ".join(_COLUMNS)
        updates = ", ".join(f"{name} = excluded.{name}" for name in _REPLACED)
        self.db.execute(
            f"INSERT INTO acme_certificates ({names}) VALUES ({', '.join('?' for _ in _COLUMNS)}) "
            f"ON CONFLICT (handle) DO UPDATE SET {updates}",
            _row(certificate),
        )

    def replace(self, certificate: AcmeCertificate, now: dt.datetime) -> bool:
        """Replace the certificate kept under its handle (a deletion mark stays); False when none is
        kept any more: the revoke job forgot it, its domain deleted, while an order for it was under
        way. What the order gave is then kept marked deleted, so the job revokes it too."""
        values = _row(certificate)
        cursor = self.db.execute(
            f"UPDATE acme_certificates SET {', '.join(f'{name} = ?' for name in _REPLACED)} WHERE handle = ?",
            [values[_COLUMNS.index(name)] for name in _REPLACED] + [certificate.handle],
        )
        if cursor.rowcount:
            return True
        self.put(attrs.evolve(certificate, deleted_at=now))
        return False

    def delete(self, handle: str) -> None:
        self.db.execute("DELETE FROM acme_certificates WHERE handle = ?", [handle])

    def served(self, apex: str) -> AcmeCertificate | None:
        """The certificate a TLS terminator serves for ``apex`` (``all_served``), or None."""
        return _choose(self._servable("AND a.apex = ?", [apex])).get(apex)

    def all_served(self) -> list[AcmeCertificate]:
        """The certificate served for every hostname (the TLS terminator's index and files): one
        a Certificate record of a verified domain names, not marked deleted; of several, the one
        whose domain was verified last (two workspaces verified for one hostname: the customer
        moved, and the old workspace has not checked again), then the one expiring last. So a
        hostname's certificate goes to one workspace, the one proving ownership now; a
        certificate no record names (its domain deleted, an order stored before its record) goes
        to none."""
        return list(_choose(self._servable("", [])).values())

    def _servable(self, where: str, params: list[Any]) -> list[tuple[str, AcmeCertificate]]:
        """(when its domain became verified, '' when verified before that was kept; the certificate)
        for each Certificate record of a verified domain naming an issued certificate not marked
        deleted. A join: a subquery for each certificate cost 0.4 s for 10,000, against 0.15."""
        rows = select(self.db, f"""SELECT a.*, coalesce(d.verified_at, '') AS owner_verified_at FROM {_OWNED}
                                   WHERE a.chain_pem IS NOT NULL AND a.deleted_at IS NULL {where}""", params)
        return [(r["owner_verified_at"], _certificate(r)) for r in rows]

    def renewable(self, handle: str) -> bool:
        """Whether the certificate may be renewed: a Certificate record of a verified domain names
        it, and it is not marked deleted. A domain that left ``verified`` (its hostname's ownership
        record now holds another workspace's token) renews nothing more."""
        rows = self.db.execute(f"SELECT 1 FROM {_OWNED} WHERE a.handle = ? AND a.deleted_at IS NULL LIMIT 1",
                               [handle]).fetchall()
        return bool(rows)

    def last_change(self) -> tuple[str | None, int]:
        """The latest ``updated_at`` and the number of certificates: what changes when one does, or
        when what is served of them may (``mark_deleted``, ``touch_domain``)."""
        last, count = self.db.execute("SELECT max(updated_at), count(*) FROM acme_certificates").fetchone()
        return last, int(count)

    def mark_deleted(self, workspace_id: uuid.UUID, domain_id: uuid.UUID, now: dt.datetime) -> int:
        """Mark the certificates the Certificate records of the domain name as deleted; call in the
        transaction that deletes the domain, before (its records go with it). The TLS terminator's
        index sees it at its next look, and the revoke job revokes them at its next run. How many
        were marked."""
        handles = self._handles_of(workspace_id, domain_id)
        if not handles:
            return 0
        return int(self.db.execute(
            f"""UPDATE acme_certificates SET deleted_at = ?, updated_at = ?
                WHERE deleted_at IS NULL AND handle IN ({', '.join('?' for _ in handles)})""",
            [ts(now), ts(self._change_time(now)), *handles]).rowcount)

    def touch_domain(self, workspace_id: uuid.UUID, domain_id: uuid.UUID, now: dt.datetime) -> None:
        """The domain became verified, or left ``verified``: what is served of its certificates may
        change, which the TLS terminator's index sees by ``last_change``."""
        handles = self._handles_of(workspace_id, domain_id)
        if handles:
            self.db.execute(f"UPDATE acme_certificates SET updated_at = ? WHERE handle IN ({', '.join('?' for _ in handles)})",
                            [ts(self._change_time(now)), *handles])

    def _handles_of(self, workspace_id: uuid.UUID, domain_id: uuid.UUID) -> list[str]:
        """The handles the domain's Certificate records name (no ACME certificate is read for a
        domain that has none: under another provider, every domain)."""
        rows = self.db.execute("""SELECT DISTINCT provider_hostname_id FROM certificates
                                  WHERE domain_id = ? AND workspace_id = ? AND provider_hostname_id IS NOT NULL""",
                               [uid(domain_id), uid(workspace_id)]).fetchall()
        return [handle for (handle,) in rows]

    def _change_time(self, now: dt.datetime) -> dt.datetime:
        """``now``, or just after the latest ``updated_at`` when that is not before it: so the change
        moves ``last_change`` whatever the clock did (another process's, a clock that stood still)."""
        [last] = self.db.execute("SELECT max(updated_at) FROM acme_certificates").fetchone()
        latest = from_ts(last) if last else None
        return now if latest is None or latest < now else latest + dt.timedelta(milliseconds=1)

    def deleted(self) -> list[AcmeCertificate]:
        """Certificates marked deleted (``mark_deleted``): revoked at once."""
        return [_certificate(r) for r in select(self.db, "SELECT * FROM acme_certificates WHERE deleted_at IS NOT NULL")]

    def unreferenced(self, created_before: dt.datetime) -> list[AcmeCertificate]:
        """Certificates not marked deleted that no Certificate record names, older than
        ``created_before`` (a new order's record is stored just after it is placed; an order whose
        record was never stored: the request's domain was deleted meanwhile, or the process stopped)."""
        rows = select(self.db, """SELECT * FROM acme_certificates a WHERE created_at < ? AND deleted_at IS NULL
                                  AND NOT EXISTS (SELECT 1 FROM certificates c WHERE c.provider_hostname_id = a.handle)""",
                      [ts(created_before)])
        return [_certificate(r) for r in rows]
