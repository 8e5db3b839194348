"""PostgreSQL's migrations of what service processes share beyond the records (store/shared.py,
store/row_cache.py), numbered with SQLite's, on which each is a recorded step with nothing to do:
one process keeps that state in memory."""

from __future__ import annotations

from store.sqlite.schema_v1 import Migration

T = 'TEXT COLLATE "C"'
"Text compared byte by byte, as SQLite compares it."

SHARED_MIGRATIONS: list[Migration] = [
    (13, "state shared by service processes", [
        # Rate-limit counts of fixed windows, by bucket and client (store/shared.py). Unlogged: a
        # crash of the database forgets at most the current window's counts, as a restart of a
        # single process does.
        f"""CREATE UNLOGGED TABLE rate_windows (
            bucket {T} NOT NULL,
            client {T} NOT NULL,
            window_index BIGINT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (bucket, client, window_index)
        )""",
        # The provider's request budget: one row per provider (its lock orders the takers), and the
        # calls sent in the current window (seconds since the epoch).
        f"""CREATE TABLE provider_budgets (
            provider {T} PRIMARY KEY,
            blocked_until DOUBLE PRECISION NOT NULL
        )""",
        f"""CREATE TABLE provider_calls (
            provider {T} NOT NULL,
            sent_at DOUBLE PRECISION NOT NULL,
            background INTEGER NOT NULL
        )""",
        "CREATE INDEX provider_calls_sent ON provider_calls(provider, sent_at)",
        # Portal sign-in states already used (their hashes), until they could no longer be used.
        f"""CREATE TABLE used_signin_states (
            state_hash {T} PRIMARY KEY,
            used_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX used_signin_states_age ON used_signin_states(used_at)",
    ]),
    (14, "changes to domains told to every process", [
        # Every update or delete of a domain, by whatever statement or cascade, tells the other
        # processes its id when the transaction commits: they drop it from their caches
        # (store/row_cache.py). Identical notices of one transaction arrive once.
        """CREATE FUNCTION cps_domain_changed() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN
               PERFORM pg_notify('cps_domains', OLD.id);
               RETURN NULL;
           END $$""",
        """CREATE TRIGGER domains_changed AFTER UPDATE OR DELETE ON domains
           FOR EACH ROW EXECUTE FUNCTION cps_domain_changed()""",
    ]),
    (15, "each workspace's share of the provider's budget", [
        # Whose each call was (the workspace's id; empty for a call made for none), and the
        # workspaces whose calls wait for the budget, by kind, until they stop looking.
        f"ALTER TABLE provider_calls ADD COLUMN workspace {T} NOT NULL DEFAULT ''",
        f"""CREATE TABLE provider_waiters (
            provider {T} NOT NULL,
            workspace {T} NOT NULL,
            background INTEGER NOT NULL,
            until DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (provider, workspace, background)
        )""",
    ]),
]

#: Migration 20: which calls came out of the part of the budget every workspace shares beyond what its
#: hostnames earn (core/edge/pacing.py). SQLite records the step with nothing to do.
WORKSPACE_SHARES_GROW = "each workspace's share of the provider's budget grows with its hostnames"
MIGRATION_20_PG: Migration = (20, WORKSPACE_SHARES_GROW, [
    "ALTER TABLE provider_calls ADD COLUMN common INTEGER NOT NULL DEFAULT 0",
])
