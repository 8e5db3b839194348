"""Migration 19 on both backends: concurrent writers of one workspace apart, and the refresh of a
requested certificate found first.

- ``domains_refresh_due`` (both): the due checks of domains whose certificate was requested and is
  not issued yet, so a claim takes those before newer domains' verifications (store/lifecycle.py)
  with one index probe, however many verifications are due.
- PostgreSQL only: the counters (``domain_counts``, ``tag_counts``) striped over ``SLOTS`` rows
  per key. Every create in a workspace added 1 to one row: under SERIALIZABLE two concurrent
  creates both updating it always aborted one, so a workspace's writers ran one at a time, after
  retries. A transaction now adds to the row of its own slot (its transaction id modulo
  ``SLOTS``): concurrent transactions have different ids, so they meet only when their ids are
  ``SLOTS`` apart. A count sums the slots (store/domains.py always did). Inserts and deletes are
  counted once per statement (transition tables), not once per row: a bulk create of 500 updated a
  counter 500 times. On SQLite one writer at a time never conflicts: its counters stay one row.

The functions keep their names (``cps_domain_statuses``, ``cps_tag_counts``): dropping one drops
the triggers that use it, as before.
"""

from __future__ import annotations

from store.sqlite.schema_v1 import Migration

NAME = "refresh before verification; counters apart for concurrent writers"
SLOTS = 64

REFRESH_DUE = """CREATE INDEX domains_refresh_due ON domains(workspace_id, next_check_at)
                 WHERE cert_status IN ('pending', 'renewing') AND next_check_at IS NOT NULL"""

_SLOT = f"mod(txid_current(), {SLOTS})::integer"


def _counter(table: str, keys: str) -> list[str]:
    """``table`` striped: a slot column in its key."""
    return [
        f"ALTER TABLE {table} ADD COLUMN slot INTEGER NOT NULL DEFAULT 0",
        f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey",
        f"ALTER TABLE {table} ADD PRIMARY KEY ({keys}, slot)",
    ]


def _function(name: str, table: str, keys: str, extra: str = "") -> str:
    """The trigger function of ``table``'s counts: a statement's inserted (``added``) or deleted
    (``removed``) rows summed per key, or one row's change of statuses, added to this
    transaction's slot. A delete cascading from its workspace counts nothing: the workspace's
    counters go with it (a counter row for it could not be inserted)."""
    upsert = (f"INSERT INTO {table} AS c ({keys}, slot, n) SELECT {keys}, {_SLOT}, {{n}} FROM {{rows}}"
              f" {{where}} GROUP BY {keys} ON CONFLICT ({keys}, slot) DO UPDATE SET n = c.n + EXCLUDED.n;")
    single = (f"INSERT INTO {table} AS c ({keys}, slot, n) VALUES ({{values}}, {_SLOT}, {{n}})"
              f" ON CONFLICT ({keys}, slot) DO UPDATE SET n = c.n + EXCLUDED.n;")
    old = ", ".join(f"OLD.{k.strip()}" for k in keys.split(","))
    new = ", ".join(f"NEW.{k.strip()}" for k in keys.split(","))
    return f"""CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP = 'INSERT' THEN
            {upsert.format(n="count(*)", rows="added", where="")}
          ELSIF TG_OP = 'DELETE' THEN
            {upsert.format(n="-count(*)", rows="removed r",
                           where="WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = r.workspace_id)")}
          ELSE
            {single.format(values=old, n=-1)}
            {single.format(values=new, n=1)}{extra}
          END IF;
          RETURN NULL;
        END $$"""


def _statement_triggers(table: str, function: str, prefix: str) -> list[str]:
    return [
        f"DROP TRIGGER {prefix}_insert ON {table}",
        f"DROP TRIGGER {prefix}_delete ON {table}",
        f"""CREATE TRIGGER {prefix}_insert AFTER INSERT ON {table} REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION {function}()""",
        f"""CREATE TRIGGER {prefix}_delete AFTER DELETE ON {table} REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION {function}()""",
    ]


_DOMAIN_KEYS = "workspace_id, ops_status, validation_status, cert_status"
_TAG_KEYS = "workspace_id, tag, ops_status, validation_status, cert_status"
#: The row trigger on a change of a domain's statuses also copies them to its tags (migration 2).
_COPY_TO_TAGS = """
            UPDATE domain_tags SET ops_status = NEW.ops_status, validation_status = NEW.validation_status,
                   cert_status = NEW.cert_status WHERE domain_id = NEW.id;"""

SQLITE: Migration = (19, NAME, [REFRESH_DUE])
POSTGRES: Migration = (19, NAME, [
    REFRESH_DUE,
    *_counter("domain_counts", _DOMAIN_KEYS),
    *_counter("tag_counts", _TAG_KEYS),
    _function("cps_domain_statuses", "domain_counts", _DOMAIN_KEYS, _COPY_TO_TAGS),
    _function("cps_tag_counts", "tag_counts", _TAG_KEYS),
    *_statement_triggers("domains", "cps_domain_statuses", "domain_counts"),
    *_statement_triggers("domain_tags", "cps_tag_counts", "tag_counts"),
])
