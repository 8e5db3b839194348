"""A domain's row: the record from the database's columns and back, and its folded search text."""

from __future__ import annotations

import functools
import json
import sqlite3
import unicodedata
import uuid
from typing import Any

import attrs
import orjson

from store._rows import from_ts, from_uid, ts, uid
from store.one_click import dns_host_from_json, dns_host_json
from store.records import DomainRow, DriftProblem

StoredDomain = dict[str, Any]
"""A domain's row as read (``SELECT d.*, w.ownership_token``): column name to stored value. Dates
are stored as the API writes them (``core.wire.format_timestamp``), ids as their text, tags and
drift as JSON."""


def fold(text: str) -> str:
    """The form text is searched in: Unicode case folding of the NFC form, so ``ÉCOLE`` is found by
    ``école``, ``Über`` by ``über`` and ``Straße`` by ``STRASSE`` (SQLite's LIKE folds only ASCII)."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFC", text).casefold()


def search_text(notes: str | None, tags: list[str]) -> str:
    """A domain's ``search_text`` column: its notes and tags, folded, one per line. ``q`` is
    printable (no newline), so a match never spans two of them; one column instead of a probe of
    the tag table per row also makes a text query cheaper."""
    return "\n".join(fold(part) for part in ([notes] if notes else []) + tags)


def _search_text_sql(notes: str | None, tags_json: str) -> str:
    """``search_text`` from the stored columns, for the migration that fills it in."""
    return search_text(notes, json.loads(tags_json))


def register_functions(conn: sqlite3.Connection) -> None:
    """The SQL functions migrations use (deterministic, so SQLite may use them anywhere)."""
    conn.create_function("cps_search_text", 2, _search_text_sql, deterministic=True)


#: A page's rows share their workspace: its id is parsed once, not once a row; and a bulk create's
#: rows written, its text made once (``str`` of a UUID is Python code, 1-2 us, three a domain).
_workspace_id = functools.lru_cache(maxsize=1024)(uuid.UUID)
workspace_text = functools.lru_cache(maxsize=1024)(str)


def from_columns(r: StoredDomain) -> DomainRow:
    return DomainRow(
        id=uuid.UUID(r["id"]),
        workspace_id=_workspace_id(r["workspace_id"]),
        apex=r["apex"],
        client_id=from_uid(r["client_id"]),
        contact_email=r["contact_email"],
        notes=r["notes"],
        tags=orjson.loads(r["tags"]),  # a page reads 100 of these: 0.2 us each, json.loads 1.1
        created_at=from_ts(r["created_at"]),
        updated_at=from_ts(r["updated_at"]),
        delegation_target=r["delegation_target"],
        validation_status=r["validation_status"],
        validation_checked_at=from_ts(r["validation_checked_at"]),
        validation_error=r["validation_error"],
        verified_at=from_ts(r["verified_at"]),
        cert_status=r["cert_status"],
        cert_issuer=r["cert_issuer"],
        cert_previous_issuer=r["cert_previous_issuer"],
        cert_not_after=from_ts(r["cert_not_after"]),
        cert_next_renewal_at=from_ts(r["cert_next_renewal_at"]),
        cert_renew_at=from_ts(r["cert_renew_at"]),
        cert_last_issued_at=from_ts(r["cert_last_issued_at"]),
        cert_error=r["cert_error"],
        cert_trace_id=from_uid(r["cert_trace_id"]),
        ops_status=r["ops_status"],
        ownership_token=r["ownership_token"],
        next_check_at=from_ts(r["next_check_at"]),
        check_step=r["check_step"],
        checks_since=from_ts(r["checks_since"]),
        drift=tuple(DriftProblem(**p) for p in orjson.loads(r["drift"])) if r["drift"] else (),
        drift_since=from_ts(r["drift_since"]),
        dns_host=dns_host_from_json(r["dns_host"]),
    )


def to_columns(d: DomainRow) -> dict[str, Any]:
    return {
        "id": str(d.id),
        "workspace_id": workspace_text(d.workspace_id),
        "apex": d.apex,
        "client_id": uid(d.client_id),
        "contact_email": d.contact_email,
        "notes": d.notes,
        "tags": orjson.dumps(d.tags).decode(),  # json.dumps: 3.5 us a domain, a tenth of its insert
        "created_at": ts(d.created_at),
        "updated_at": ts(d.updated_at),
        "delegation_target": d.delegation_target,
        "validation_status": d.validation_status,
        "validation_checked_at": ts(d.validation_checked_at),
        "validation_error": d.validation_error,
        "verified_at": ts(d.verified_at),
        "cert_status": d.cert_status,
        "cert_issuer": d.cert_issuer,
        "cert_previous_issuer": d.cert_previous_issuer,
        "cert_not_after": ts(d.cert_not_after),
        "cert_next_renewal_at": ts(d.cert_next_renewal_at),
        "cert_renew_at": ts(d.cert_renew_at),
        "cert_last_issued_at": ts(d.cert_last_issued_at),
        "cert_error": d.cert_error,
        "cert_trace_id": uid(d.cert_trace_id),
        "ops_status": d.ops_status,
        "search_text": search_text(d.notes, d.tags),
        "next_check_at": ts(d.next_check_at),
        "check_step": d.check_step,
        "checks_since": ts(d.checks_since),
        "drift": json.dumps([attrs.asdict(p) for p in d.drift]) if d.drift else None,
        "drift_since": ts(d.drift_since),
        "dns_host": dns_host_json(d.dns_host),
    }
