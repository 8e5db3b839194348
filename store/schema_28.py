"""Migration 28: ``q``'s total counted from the distinct search texts on PostgreSQL (issue 49).

- PostgreSQL only: ``text_counts``, the workspace's domains per distinct ``search_text`` (its
  folded notes and tags), kept by triggers as ``domain_counts`` is (migration 19: a statement's
  inserts or deletes summed once, striped over slots so concurrent writers of one workspace do not
  abort each other). A ``q`` matched by a third of 1M domains ("trial", a tag) was counted by
  checking every row with LIKE (273 ms); the distinct texts are few where tags and notes repeat,
  and the domains matched by their hostname alone come from the apex's trigram index.
  ``text_hash`` keys a text, which may be longer than a B-tree key may be.
- SQLite: nothing (its FTS5 index counts a phrase); the number is taken so both lists agree.
"""

from __future__ import annotations

from store.postgres.schema_shared import T
from store.schema_19 import SLOTS
from store.sqlite.schema_v1 import Migration

NAME = "domains per distinct search text"

_SLOT = f"mod(txid_current(), {SLOTS})::integer"
_UPSERT = ("INSERT INTO text_counts AS c (workspace_id, text_hash, slot, search_text, n) {rows}"
           " ON CONFLICT (workspace_id, text_hash, slot) DO UPDATE SET n = c.n + EXCLUDED.n;")
_GROUPED = ("SELECT workspace_id, md5(search_text), " + _SLOT + ", search_text, {n} FROM {rows} {where}"
            " GROUP BY workspace_id, search_text")
_ONE = "VALUES ({row}.workspace_id, md5({row}.search_text), " + _SLOT + ", {row}.search_text, {n})"

POSTGRES: Migration = (28, NAME, [
    f"""CREATE TABLE text_counts (
        workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        text_hash {T} NOT NULL,
        slot INTEGER NOT NULL,
        search_text {T} NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (workspace_id, text_hash, slot)
    )""",
    "CREATE INDEX text_counts_text ON text_counts USING gin (search_text gin_trgm_ops)",
    f"""CREATE FUNCTION cps_text_counts() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP = 'INSERT' THEN
            {_UPSERT.format(rows=_GROUPED.format(n="count(*)", rows="added", where=""))}
          ELSIF TG_OP = 'DELETE' THEN
            {_UPSERT.format(rows=_GROUPED.format(
                n="-count(*)", rows="removed r", where="WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = r.workspace_id)"))}
          ELSE
            {_UPSERT.format(rows=_ONE.format(row="OLD", n=-1))}
            {_UPSERT.format(rows=_ONE.format(row="NEW", n=1))}
          END IF;
          RETURN NULL;
        END $$""",
    """CREATE TRIGGER text_counts_insert AFTER INSERT ON domains REFERENCING NEW TABLE AS added
       FOR EACH STATEMENT EXECUTE FUNCTION cps_text_counts()""",
    """CREATE TRIGGER text_counts_delete AFTER DELETE ON domains REFERENCING OLD TABLE AS removed
       FOR EACH STATEMENT EXECUTE FUNCTION cps_text_counts()""",
    """CREATE TRIGGER text_counts_update AFTER UPDATE OF search_text ON domains
       FOR EACH ROW WHEN (OLD.search_text IS DISTINCT FROM NEW.search_text) EXECUTE FUNCTION cps_text_counts()""",
    """INSERT INTO text_counts SELECT workspace_id, md5(search_text), 0, search_text, count(*) FROM domains
       GROUP BY workspace_id, search_text""",
])
SQLITE: Migration = (28, NAME, [])
