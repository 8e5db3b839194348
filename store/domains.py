"""Domains and their tags, including the filtered, keyset-paginated query."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from typing import TYPE_CHECKING, Any, cast

import attrs

from store._rows import postgres, select, ts, uid
from store.domain_rows import StoredDomain, from_columns, to_columns
from store.domain_sql import apex_like, insert_rows, like
from store.kept_totals import KeptTotals
from store.postgres.text_index import TEXT_ID_BITS, TEXT_ID_MASK, candidates, phrase
from store.records import DomainRow
from store.row_cache import RowCache

if TYPE_CHECKING:
    from store.sqlite.connection import Database

#: Notified by a trigger (store/postgres/schema_shared.py) with a domain's id when its row is updated or
#: deleted on PostgreSQL: every process drops it from its cache.
DOMAINS_CHANNEL = "cps_domains"

#: API sort field -> column. Only these names ever reach SQL text; values are parameters.
SORT_COLUMNS = {
    "createdAt": "created_at",
    "updatedAt": "updated_at",
    "apex": "apex",
    "opsStatus": "ops_status",
    "validationStatus": "validation_status",
    "certStatus": "cert_status",
}

_SELECT = "SELECT d.*, w.ownership_token FROM domains d JOIN workspaces w ON w.id = d.workspace_id"


@attrs.frozen
class DomainFilter:
    q: str | None = None
    "Already folded (``fold``): searched in the apex and in the notes and tags (``search_text``)."
    q_hostname: str | None = None
    "``q`` as a hostname's ASCII form (IDNA), when that differs: searched in the apex too."
    ops_status: str | None = None
    validation_status: str | None = None
    cert_status: str | None = None
    client_id: uuid.UUID | None = None
    tags: tuple[str, ...] = ()


#: Candidates of ``q`` checked one by one (LIKE) at most, for a count; more are counted by phrase.
CHECKED_ONE_BY_ONE = 20_000
_TAG_COLUMNS = ("domain_id", "workspace_id", "tag", "ops_status", "validation_status", "cert_status")
def _where(workspace_id: uuid.UUID, f: DomainFilter, *, tags_by_index: bool = True,
           text_ids: tuple[int, int] | None = None, pg: bool = False) -> tuple[str, list[Any]]:
    """SQL conditions for a filter. ``tags_by_index`` drives tag matching from the tag index
    (best when the tags are rare); otherwise each candidate row is probed (best when common).
    ``text_ids``, the workspace's range of ids in the trigram index (migration 11), takes ``q``'s
    rows from the index (best when they are few); without it each row the sort order visits is
    matched with LIKE alone (best when they are many)."""
    clauses = ["d.workspace_id = ?"]
    params: list[Any] = [uid(workspace_id)]
    for column, value in (
        ("ops_status", f.ops_status),
        ("validation_status", f.validation_status),
        ("cert_status", f.cert_status),
    ):
        if value is not None:
            clauses.append(f"d.{column} = ?")
            params.append(value)
    if f.client_id is not None:
        clauses.append("d.client_id = ?")
        params.append(uid(f.client_id))
    for tag in f.tags:
        if tags_by_index:
            clauses.append("d.id IN (SELECT domain_id FROM domain_tags WHERE workspace_id = ? AND tag = ?)")
            params += [uid(workspace_id), tag]
        else:
            clauses.append("EXISTS (SELECT 1 FROM domain_tags t WHERE t.domain_id = d.id AND t.tag = ?)")
            params.append(tag)
    if f.q:
        match = candidates(f.q, f.q_hostname) if text_ids is not None else None
        if match is not None and text_ids is not None:
            clauses.append("d.rowid IN (SELECT rowid & ? FROM domain_text WHERE domain_text MATCH ? AND rowid BETWEEN ? AND ?)")
            params += [TEXT_ID_MASK, match, *text_ids]
            # The rows come from the text index, whatever the statistics say: without them SQLite
            # takes a workspace's 1M rows for 10 and walks them all in sort order (0.7 s for a
            # word); the unary + keeps the workspace's indexes out of the plan (the check stays).
            clauses[0] = "+d.workspace_id = ?"
        # Stored hostnames are ASCII (A-labels), which LIKE folds; notes and tags are matched in
        # their folded form (``search_text``), tags one by one as values, never as JSON text.
        apexes = [f.q] if f.q_hostname is None or f.q_hostname == f.q else [f.q, f.q_hostname]  # a scan each
        matches = [apex_like(a, pg) for a in apexes]
        clauses.append("(" + "".join(f"{sql} OR " for sql, _ in matches) + "d.search_text LIKE ? ESCAPE '\\')")
        params += [*(p for _, ps in matches for p in ps), like(f.q)]
    return " AND ".join(clauses), params


class DomainRepo:
    """Domains. Rows read by id are kept in a bounded cache (store/row_cache.py) that every write
    here drops from; a rolled-back transaction on SQLite empties it (``ended``). On PostgreSQL, other
    processes' writes drop rows through ``DOMAINS_CHANNEL``; a transaction reads past the cache,
    since a row kept may be a notice behind; ``q`` is answered by migration 11's trigram indexes."""

    CACHE_SIZE = 10_000

    def __init__(self, db: Database) -> None:
        self.db = db
        self.pg = postgres(db)
        self.cache: RowCache[uuid.UUID, DomainRow] = RowCache(self.CACHE_SIZE, live=lambda: not self.pg)
        self._workspace_rowids: dict[uuid.UUID, int] = {}
        self._written = threading.local()
        "Ids written in this thread's transaction (PostgreSQL): dropped again once it has ended."
        self.inserted = 0
        "Domains inserted since the store last looked at SQLite's statistics (``Store.optimize``)."
        self._totals = KeptTotals(db, postgres=self.pg)

    def _pg_transaction(self) -> bool:
        return self.pg and bool(cast(Any, self.db).in_transaction())

    def cached(self, workspace_id: uuid.UUID, domain_id: uuid.UUID) -> DomainRow | None:
        """A kept domain of this workspace, with no query: callable on the event loop."""
        row = self.cache.get(domain_id)
        return row if row is not None and row.workspace_id == workspace_id else None

    def heard(self, domain_id: str | None) -> None:
        """What a process said on ``DOMAINS_CHANNEL``: this domain changed, or (None) any may have."""
        try:
            changed = uuid.UUID(domain_id) if domain_id is not None else None
        except ValueError:
            changed = None  # not a notice this code sends: assume the worst
        if changed is None:
            self.cache.forget_all()
        else:
            self.cache.forget([changed])

    def forget(self, domain_ids: list[uuid.UUID]) -> None:
        """Drop rows this process writes, here and by other SQL (the lifecycle's leases)."""
        self.cache.forget(domain_ids)
        if self._pg_transaction():
            # A unit in another thread may read and keep the row before this commits.
            self._written.__dict__.setdefault("ids", []).extend(domain_ids)

    def ended(self, kept: bool) -> None:
        """A transaction ended. On SQLite a rolled-back one may have left rows of its own in the
        cache; on PostgreSQL a transaction keeps nothing, but another thread may have kept a row
        it wrote, read before it committed."""
        written = self._written.__dict__.pop("ids", None)
        if not kept and not self.pg:
            self.cache.forget_all()
        elif written:
            self.cache.forget(written)

    def insert(self, domain: DomainRow) -> None:
        self.insert_many([domain])

    def insert_many(self, domains: list[DomainRow]) -> None:
        """New domains, many rows to a statement: SQLite sets up a table's triggers (the counts)
        once per statement, and with one statement a row that set-up cost a bulk create of 500
        more than the rows themselves (500 inserts: 35 ms one a statement, 16 ms 20 a statement)."""
        rows = [to_columns(d) for d in domains]
        if rows:
            insert_rows(self.db, "domains", list(rows[0]), [list(r.values()) for r in rows])
        self._write_tags(domains, rows)
        self.inserted += len(rows)

    def insert_new(self, domains: list[DomainRow]) -> set[uuid.UUID]:
        """Those of the new domains whose hostname their workspace does not hold yet; the ids inserted.
        Nothing is read first: on PostgreSQL a SERIALIZABLE read of the hostnames would
        predicate-lock the index pages every concurrent create writes to, and two creates in one
        workspace would abort each other (a conflict on the unique key itself waits and retries)."""
        rows = [to_columns(d) for d in domains]
        if not rows:
            return set()
        returned = insert_rows(self.db, "domains", list(rows[0]), [list(r.values()) for r in rows],
                                " ON CONFLICT (workspace_id, apex) DO NOTHING RETURNING id")
        inserted_ids = {r[0] for r in returned}
        written = [(d, cols) for d, cols in zip(domains, rows, strict=True) if cols["id"] in inserted_ids]
        self._write_tags([d for d, _ in written], [cols for _, cols in written])
        self.inserted += len(written)
        return {d.id for d, _ in written}

    def update(self, domain: DomainRow, *, tags_changed: bool = False) -> None:
        """Write every mutable column of a domain of its workspace (tags when they changed)."""
        cols = to_columns(domain)
        for fixed in ("id", "workspace_id", "apex", "created_at"):
            cols.pop(fixed)
        self.db.execute(
            f"UPDATE domains SET {', '.join(f'{c} = ?' for c in cols)} WHERE id = ? AND workspace_id = ?",
            [*cols.values(), uid(domain.id), uid(domain.workspace_id)],
        )
        self.forget([domain.id])
        if tags_changed:
            self.db.execute("DELETE FROM domain_tags WHERE domain_id = ?", [uid(domain.id)])
            self._write_tags([domain], [{"id": uid(domain.id), "workspace_id": uid(domain.workspace_id)}])

    def _write_tags(self, domains: list[DomainRow], columns: list[dict[str, Any]]) -> None:
        """The domains' tag rows; ``columns``, their rows as written, give the ids' text made once."""
        tags = [(cols["id"], cols["workspace_id"], tag, d.ops_status, d.validation_status, d.cert_status)
                for d, cols in zip(domains, columns, strict=True) for tag in d.tags]
        insert_rows(self.db, "domain_tags", list(_TAG_COLUMNS), tags)

    def get(self, workspace_id: uuid.UUID, domain_id: uuid.UUID) -> DomainRow | None:
        """A domain of this workspace; another workspace's domain is as good as missing."""
        kept = not self._pg_transaction()  # the cache answers always on SQLite, outside transactions on PostgreSQL
        cached = self.cache.get(domain_id) if kept else None
        if cached is None:
            seen = self.cache.seen() if kept else None
            rows = select(self.db, f"{_SELECT} WHERE d.id = ?", [uid(domain_id)])
            if not rows:
                return None
            cached = from_columns(rows[0])
            self.cache.fill(domain_id, cached, seen)
        return cached if cached.workspace_id == workspace_id else None

    def by_apex(self, workspace_id: uuid.UUID, apexes: list[str]) -> dict[str, DomainRow]:
        """The workspace's domains among these hostnames, keyed by hostname."""
        found: dict[str, DomainRow] = {}
        for start in range(0, len(apexes), 500):  # stay far below SQLite's parameter limit
            chunk = apexes[start : start + 500]
            rows = select(
                self.db,
                f"{_SELECT} WHERE d.workspace_id = ? AND d.apex IN ({', '.join('?' for _ in chunk)})",
                [uid(workspace_id), *chunk],
            )
            found.update({r["apex"]: from_columns(r) for r in rows})
        return found

    def with_apex(self, apex: str) -> list[DomainRow]:
        """Every workspace's domain for this hostname (the development DNS simulation only)."""
        return [from_columns(r) for r in select(self.db, f"{_SELECT} WHERE d.apex = ?", [apex])]

    def check_others_now(self, apex: str, workspace_id: uuid.UUID, now: dt.datetime) -> list[uuid.UUID]:
        """Other workspaces' verified domains for ``apex``, due for a background check at ``now``:
        the hostname was just verified in ``workspace_id`` (``domains_verified_apex``, migration 22)."""
        rows = self.db.execute(
            "UPDATE domains SET next_check_at = ? WHERE apex = ? AND validation_status = 'verified' AND workspace_id <> ? "
            "RETURNING id", [ts(now), apex, uid(workspace_id)]).fetchall()
        found = [uuid.UUID(domain_id) for (domain_id,) in rows]
        self.forget(found)
        return found

    def targeting_elsewhere(self, zone: str, limit: int) -> list[DomainRow]:
        """Domains whose delegation CNAME points outside ``zone`` (added under another provider)."""
        rows = select(self.db, f"{_SELECT} WHERE d.delegation_target NOT LIKE ? LIMIT ?", [f"%.{zone}", limit])
        return [from_columns(r) for r in rows]

    def delete(self, workspace_id: uuid.UUID, domain_id: uuid.UUID) -> bool:
        cursor = self.db.execute("DELETE FROM domains WHERE id = ? AND workspace_id = ?", [uid(domain_id), uid(workspace_id)])
        if cursor.rowcount:
            self.forget([domain_id])
        return cursor.rowcount > 0

    def count(self, workspace_id: uuid.UUID, f: DomainFilter) -> int:
        """Matches of a filter. Status-only and one-tag filters read the trigger-kept counters;
        several tags count one range of a tag index; text and client filters count rows. Those
        counted are kept until the database changes (store/kept_totals.py)."""
        statuses = [
            (column, value)
            for column, value in (
                ("ops_status", f.ops_status), ("validation_status", f.validation_status), ("cert_status", f.cert_status)
            )
            if value is not None
        ]
        if f.q is None and f.client_id is None and not f.tags:
            sql = "SELECT coalesce(sum(n), 0) FROM domain_counts WHERE workspace_id = ?"
            sql += "".join(f" AND {column} = ?" for column, _ in statuses)
            return int(self.db.execute(sql, [uid(workspace_id), *(v for _, v in statuses)]).fetchone()[0])
        if f.q is None and f.client_id is None and len(f.tags) == 1:
            sql = "SELECT coalesce(sum(n), 0) FROM tag_counts WHERE workspace_id = ? AND tag = ?"
            sql += "".join(f" AND {column} = ?" for column, _ in statuses)
            return int(self.db.execute(sql, [uid(workspace_id), f.tags[0], *(v for _, v in statuses)]).fetchone()[0])
        return self._totals.get((workspace_id, f), lambda: self._count_rows(workspace_id, f, statuses))

    def _count_rows(self, workspace_id: uuid.UUID, f: DomainFilter, statuses: list[tuple[str, str]]) -> int:
        if f.q is None and f.client_id is None:
            first, *others = f.tags
            sql = "SELECT count(*) FROM domain_tags t WHERE t.workspace_id = ? AND t.tag = ?"
            sql += "".join(f" AND t.{column} = ?" for column, _ in statuses)
            sql += " AND EXISTS (SELECT 1 FROM domain_tags o WHERE o.domain_id = t.domain_id AND o.tag = ?)" * len(others)
            return int(self.db.execute(sql, [uid(workspace_id), first, *(v for _, v in statuses), *others]).fetchone()[0])
        if self.pg and f.q and f.client_id is None and not f.tags and not statuses:
            # The domains whose folded notes and tags match, from their distinct texts (migration
            # 28), and those matched by their hostname alone, from the apex's trigram index: a
            # common ``q`` is no longer checked row by row (273 ms for a third of 1M domains).
            apexes = [f.q] if f.q_hostname is None or f.q_hostname == f.q else [f.q, f.q_hostname]
            matches = [apex_like(a, True) for a in apexes]
            sql = ("SELECT (SELECT coalesce(sum(n), 0) FROM text_counts WHERE workspace_id = ? AND search_text LIKE ? ESCAPE '\\')"
                   " + (SELECT count(*) FROM domains d WHERE d.workspace_id = ? AND ("
                   + " OR ".join(sql for sql, _ in matches)
                   + ") AND NOT d.search_text LIKE ? ESCAPE '\\')")
            params = [uid(workspace_id), like(f.q), uid(workspace_id), *(p for _, ps in matches for p in ps), like(f.q)]
            return int(self.db.execute(sql, params).fetchone()[0])
        # Only when ``q`` has no other hostname form: the index cannot tell the apex from the notes
        # and tags, where the hostname form does not count (an IDN's A-label in a note is not a match).
        exact = phrase(f.q, None) if f.q and f.q_hostname in (None, f.q) and not self.pg else None
        if exact is not None and f.client_id is None and not f.tags and not statuses:
            ids = self._text_ids(workspace_id)
            if self._many_candidates(f, ids):
                # The phrase answers ``q`` exactly, within the workspace's range of ids.
                sql = "SELECT count(*) FROM domain_text WHERE domain_text MATCH ? AND rowid BETWEEN ? AND ?"
                return int(self.db.execute(sql, [exact, *ids]).fetchone()[0])
        where, params = _where(workspace_id, f, text_ids=None if self.pg else self._text_ids(workspace_id), pg=self.pg)
        return int(self.db.execute(f"SELECT count(*) FROM domains d WHERE {where}", params).fetchone()[0])

    def _many_candidates(self, f: DomainFilter, ids: tuple[int, int]) -> bool:
        """Whether ``q``'s candidates (its rarest trigrams' rows) are too many to check one by one;
        the phrase, which reads every trigram's rows, then costs less. Counted up to a bound only."""
        sql = "SELECT count(*) FROM (SELECT 1 FROM domain_text WHERE domain_text MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?)"
        found = self.db.execute(sql, [candidates(f.q or "", f.q_hostname), *ids, CHECKED_ONE_BY_ONE + 1]).fetchone()[0]
        return int(found) > CHECKED_ONE_BY_ONE

    def _text_ids(self, workspace_id: uuid.UUID) -> tuple[int, int]:
        """The workspace's range of ids in the text index (a rowid never changes: kept once read)."""
        rowid = self._workspace_rowids.get(workspace_id)
        if rowid is None:
            found = self.db.execute("SELECT rowid FROM workspaces WHERE id = ?", [uid(workspace_id)]).fetchone()
            rowid = self._workspace_rowids[workspace_id] = found[0] if found else -1
        return rowid << TEXT_ID_BITS, (rowid << TEXT_ID_BITS) + TEXT_ID_MASK

    def page(
        self,
        workspace_id: uuid.UUID,
        f: DomainFilter,
        *,
        sort_by: str,
        descending: bool,
        after: tuple[str, str] | None,
        limit: int,
        sparse: bool = False,
    ) -> list[StoredDomain]:
        """Up to ``limit`` domains in sort order, starting after the (sort value, id) key, as stored:
        a page is rendered from its columns (``core.domains.shape.render_stored``), since building
        each row's record and formatting its dates again cost more than reading it.

        ``sparse`` says the filter matches few of the workspace's domains, so walking the sort
        order would visit many rows per match; tags are then matched from their index.
        """
        column = SORT_COLUMNS[sort_by]
        text_ids = self._text_ids(workspace_id) if sparse and not self.pg else None
        where, params = _where(workspace_id, f, tags_by_index=sparse, text_ids=text_ids, pg=self.pg)
        op, direction = ("<", "DESC") if descending else (">", "ASC")
        if after is not None:
            # A row value, not the equivalent OR: SQLite then reads the sort index from that key
            # on, where the OR form can lead it to sort the whole workspace (6 ms at 10k domains).
            where += f" AND (d.{column}, d.id) {op} (?, ?)"
            params += [after[0], after[1]]
        select_ = _SELECT
        if self.pg:
            # The workspace's token once (an InitPlan), not joined row by row: after a cursor the
            # planner takes the page for a row or two and probes the workspaces' key once per row
            # it returns (8 ms for a page of 100 at 1M, issue 49).
            select_ = "SELECT d.*, (SELECT w.ownership_token FROM workspaces w WHERE w.id = ?) AS ownership_token FROM domains d"
            params = [uid(workspace_id), *params]
        sql = f"{select_} WHERE {where} ORDER BY d.{column} {direction}, d.id {direction} LIMIT ?"
        return select(self.db, sql, [*params, limit])

    def serving(self, workspace_id: uuid.UUID, *, issued_before: dt.datetime, at_most: int) -> int:
        """The workspace's domains verified and serving a certificate (opsStatus ``active``) last
        issued before ``issued_before``, counted up to ``at_most``: along the index of its active
        domains, no further than that many (core/edge/pacing.py needs no more)."""
        sql = """SELECT count(*) FROM (
                     SELECT 1 FROM domains WHERE workspace_id = ? AND ops_status = 'active'
                     AND validation_status = 'verified' AND cert_last_issued_at <= ? LIMIT ?
                 ) AS serving"""
        return int(self.db.execute(sql, [uid(workspace_id), ts(issued_before), at_most]).fetchone()[0])

    def workspace_size(self, workspace_id: uuid.UUID) -> int:
        return self.count(workspace_id, DomainFilter())

    @staticmethod
    def sort_value(domain: StoredDomain, sort_by: str) -> str:
        """The stored text of the sort column, as the keyset condition compares it."""
        value: str = domain[SORT_COLUMNS[sort_by]]
        return value
