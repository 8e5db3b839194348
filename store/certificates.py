"""Certificates, newest first per domain."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from store._rows import from_ts, select, ts, uid
from store.records import Certificate

if TYPE_CHECKING:
    from store.sqlite.connection import Database

_COLUMNS = (
    "id", "workspace_id", "domain_id", "apex", "wildcard", "status", "issuer", "provider", "not_before",
    "not_after", "provider_certificate_id", "provider_hostname_id", "provider_ssl_id", "provider_status",
    "provider_hostname_status", "last_checked_at", "last_error", "created_at", "announced", "profile",
    "previous_issuer", "overdue_announced_for",
)


def _certificate(r: dict[str, Any]) -> Certificate:
    return Certificate(
        id=uuid.UUID(r["id"]),
        workspace_id=uuid.UUID(r["workspace_id"]),
        domain_id=uuid.UUID(r["domain_id"]),
        apex=r["apex"],
        wildcard=bool(r["wildcard"]),
        status=r["status"],
        issuer=r["issuer"],
        provider=r["provider"],
        bundle_available=False,
        not_before=from_ts(r["not_before"]),
        not_after=from_ts(r["not_after"]),
        provider_certificate_id=r["provider_certificate_id"],
        provider_hostname_id=r["provider_hostname_id"],
        provider_ssl_id=r["provider_ssl_id"],
        provider_status=r["provider_status"],
        provider_hostname_status=r["provider_hostname_status"],
        last_checked_at=from_ts(r["last_checked_at"]),
        last_error=r["last_error"],
        created_at=from_ts(r["created_at"]),
        announced=tuple(t for t in r["announced"].split(",") if t),
        profile=r["profile"],
        previous_issuer=r["previous_issuer"],
        overdue_announced_for=r["overdue_announced_for"],
    )


def _values(c: Certificate) -> list[Any]:
    return [
        uid(c.id), uid(c.workspace_id), uid(c.domain_id), c.apex, int(c.wildcard), c.status, c.issuer, c.provider,
        ts(c.not_before), ts(c.not_after), c.provider_certificate_id, c.provider_hostname_id, c.provider_ssl_id,
        c.provider_status, c.provider_hostname_status, ts(c.last_checked_at), c.last_error, ts(c.created_at),
        ",".join(c.announced), c.profile, c.previous_issuer, c.overdue_announced_for,
    ]


class CertificateRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(self, certificate: Certificate) -> None:
        self.db.execute(
            f"INSERT INTO certificates ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})",
            _values(certificate),
        )

    def update(self, certificate: Certificate) -> None:
        """Write every column of a certificate of its workspace."""
        values = dict(zip(_COLUMNS, _values(certificate)))
        key = [values.pop("id"), values.pop("workspace_id")]
        self.db.execute(
            f"UPDATE certificates SET {', '.join(f'{c} = ?' for c in values)} WHERE id = ? AND workspace_id = ?",
            [*values.values(), *key],
        )

    def get(self, workspace_id: uuid.UUID, certificate_id: uuid.UUID) -> Certificate | None:
        """A certificate of this workspace; another workspace's is as good as missing."""
        rows = select(
            self.db, "SELECT * FROM certificates WHERE id = ? AND workspace_id = ?", [uid(certificate_id), uid(workspace_id)]
        )
        return _certificate(rows[0]) if rows else None

    def latest(self, workspace_id: uuid.UUID, domain_id: uuid.UUID) -> Certificate | None:
        """The domain's most recent certificate."""
        page = self.page(workspace_id, domain_id, after=None, limit=1)
        return page[0] if page else None

    def page(
        self, workspace_id: uuid.UUID, domain_id: uuid.UUID, *, after: tuple[str, str] | None, limit: int
    ) -> list[Certificate]:
        """Newest first, starting strictly after the (created_at, id) key of the last row shown."""
        where, params = "domain_id = ? AND workspace_id = ?", [uid(domain_id), uid(workspace_id)]
        if after is not None:
            where += " AND (created_at, id) < (?, ?)"  # a row value: read from the index at the key
            params += [after[0], after[1]]
        rows = select(
            self.db,
            f"SELECT * FROM certificates WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ?",
            [*params, limit],
        )
        return [_certificate(r) for r in rows]

    def count(self, workspace_id: uuid.UUID, domain_id: uuid.UUID) -> int:
        return int(self.db.execute(
            "SELECT count(*) FROM certificates WHERE domain_id = ? AND workspace_id = ?", [uid(domain_id), uid(workspace_id)]
        ).fetchone()[0])

    @staticmethod
    def page_key(certificate: Certificate) -> tuple[str, str]:
        """The keyset position of a row, as ``page(after=...)`` compares it."""
        return ts(certificate.created_at) or "", str(certificate.id)



