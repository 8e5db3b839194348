"""The schema on SQLite, migration by migration: the first release's (``schema_v1``), then each
later one; PostgreSQL's list (store/postgres/schema.py) has the same numbers. A migration is never
edited once released: a change to the schema is a new entry at the end."""

from __future__ import annotations

from store.postgres.schema_shared import WORKSPACE_SHARES_GROW
from store.schema_19 import SQLITE as MIGRATION_19
from store.schema_21 import SQLITE as MIGRATION_21
from store.schema_22 import SQLITE as MIGRATION_22
from store.schema_23 import SQLITE as MIGRATION_23
from store.schema_24 import SQLITE as MIGRATION_24
from store.schema_25 import SQLITE as MIGRATION_25
from store.schema_26 import SQLITE as MIGRATION_26
from store.schema_27 import SQLITE as MIGRATION_27
from store.schema_28 import SQLITE as MIGRATION_28
from store.schema_acme import ACME_SQLITE
from store.schema_both import BOTH, STAND_INS
from store.sqlite.schema_v1 import FIRST, Migration

MIGRATIONS: list[Migration] = [
    *FIRST,
    (
        6,
        "verification links",
        [
            # The token is kept as an HMAC (lookup) and AES-GCM encrypted (shown again in lists);
            # never in clear. A link goes with its domain.
            """CREATE TABLE verification_links (
                id TEXT PRIMARY KEY,
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                domain_id TEXT NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
                token_hash TEXT NOT NULL UNIQUE,
                token_ciphertext TEXT NOT NULL,
                recipient_email TEXT,
                created_at TEXT NOT NULL,
                expires_at TEXT NOT NULL,
                last_reminded_at TEXT,
                revoked_at TEXT
            )""",
            "CREATE INDEX verification_links_workspace ON verification_links(workspace_id, created_at)",
            "CREATE INDEX verification_links_domain ON verification_links(domain_id, created_at)",
        ],
    ),
    (
        7,
        "tag counts",
        [
            # Domains per workspace, tag and status combination, kept exact by triggers on the tag
            # index, so a query for one tag (with or without statuses) is counted from a handful of
            # rows instead of one index entry per match (67,000 of them for "vip" + active at 1M).
            """CREATE TABLE tag_counts (
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                tag TEXT NOT NULL,
                ops_status TEXT NOT NULL,
                validation_status TEXT NOT NULL,
                cert_status TEXT NOT NULL,
                n INTEGER NOT NULL,
                PRIMARY KEY (workspace_id, tag, ops_status, validation_status, cert_status)
            ) WITHOUT ROWID""",
            """INSERT INTO tag_counts
               SELECT workspace_id, tag, ops_status, validation_status, cert_status, count(*) FROM domain_tags
               GROUP BY workspace_id, tag, ops_status, validation_status, cert_status""",
            """CREATE TRIGGER tag_counts_insert AFTER INSERT ON domain_tags BEGIN
                 INSERT INTO tag_counts VALUES (new.workspace_id, new.tag, new.ops_status, new.validation_status,
                                                new.cert_status, 1)
                 ON CONFLICT DO UPDATE SET n = n + 1;
               END""",
            """CREATE TRIGGER tag_counts_delete AFTER DELETE ON domain_tags BEGIN
                 UPDATE tag_counts SET n = n - 1 WHERE workspace_id = old.workspace_id AND tag = old.tag
                   AND ops_status = old.ops_status AND validation_status = old.validation_status
                   AND cert_status = old.cert_status;
               END""",
            """CREATE TRIGGER tag_counts_update AFTER UPDATE OF ops_status, validation_status, cert_status ON domain_tags
               BEGIN
                 UPDATE tag_counts SET n = n - 1 WHERE workspace_id = old.workspace_id AND tag = old.tag
                   AND ops_status = old.ops_status AND validation_status = old.validation_status
                   AND cert_status = old.cert_status;
                 INSERT INTO tag_counts VALUES (new.workspace_id, new.tag, new.ops_status, new.validation_status,
                                                new.cert_status, 1)
                 ON CONFLICT DO UPDATE SET n = n + 1;
               END""",
        ],
    ),
    (
        8,
        "folded search text",
        [
            # Notes and tags, Unicode case-folded, written by the store with every domain
            # (store.domains.search_text): SQLite's LIKE folds only ASCII, so ``q`` = "école"
            # never found "ÉCOLE". Existing rows are filled in through the store's SQL function.
            "ALTER TABLE domains ADD COLUMN search_text TEXT NOT NULL DEFAULT ''",
            "UPDATE domains SET search_text = cps_search_text(notes, tags)",
        ],
    ),
    (
        9,
        "reminders sent, by recipient",
        [
            # One row per reminder e-mail, kept a day: the per-recipient daily limit counts them
            # across links and workspaces. The address is stored normalised (lower case).
            """CREATE TABLE reminder_sends (
                recipient TEXT NOT NULL,
                sent_at TEXT NOT NULL
            )""",
            "CREATE INDEX reminder_sends_recipient ON reminder_sends(recipient, sent_at)",
        ],
    ),
    (
        10,
        "lifecycle: check schedule, drift, announced events",
        [
            # The background checks' schedule (core/lifecycle/): when a domain is checked next (a
            # check in progress holds it as a lease, pushed forward), the backoff step, and since
            # when it has been waiting (pending domains stop being checked pending_days after).
            "ALTER TABLE domains ADD COLUMN next_check_at TEXT",
            "ALTER TABLE domains ADD COLUMN check_step INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE domains ADD COLUMN checks_since TEXT",
            "CREATE INDEX domains_next_check ON domains(next_check_at) WHERE next_check_at IS NOT NULL",
            # Existing domains are checked once soon, from their creation on.
            "UPDATE domains SET next_check_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), checks_since = created_at",
            # What a check of a verified domain found wrong with its delegation or CAA: JSON, NULL when nothing.
            "ALTER TABLE domains ADD COLUMN drift TEXT",
            "ALTER TABLE domains ADD COLUMN drift_since TEXT",
            "CREATE INDEX domains_drifted ON domains(id) WHERE drift IS NOT NULL",  # counted by /metrics
            # Event types queued for a certificate, so a transition is announced once
            # ([lifecycle] events = "transitions"). Existing ones announced what they are.
            "ALTER TABLE certificates ADD COLUMN announced TEXT NOT NULL DEFAULT ''",
            """UPDATE certificates SET announced = CASE status WHEN 'pending' THEN 'cert.issue_pending'
                 WHEN 'active' THEN 'cert.issued' ELSE 'cert.issue_failed' END""",
        ],
    ),
    (
        11,
        "free-text index",
        [
            # ``q`` from a trigram index (store.domains.text_match) of what it searches: the apex
            # and the folded notes and tags, a line each. A phrase of trigrams is a substring, so
            # the index answers ``q`` exactly. Each row's id in it is its workspace's rowid and the
            # domain's (``(w << 40) + d``): a workspace's rows are one range of ids, which the
            # index itself narrows to, so a count never visits another workspace's rows. Triggers
            # keep it in the same transaction as the rows; a workspace's domains go before the
            # workspace itself (its rowid names their entries).
            "CREATE VIRTUAL TABLE domain_text USING fts5(body, tokenize = 'trigram', columnsize = 0)",
            """CREATE TRIGGER domain_text_insert AFTER INSERT ON domains BEGIN
                 INSERT INTO domain_text (rowid, body)
                 VALUES (((SELECT rowid FROM workspaces WHERE id = new.workspace_id) << 40) + new.rowid,
                         new.apex || char(10) || new.search_text);
               END""",
            """CREATE TRIGGER domain_text_delete AFTER DELETE ON domains BEGIN
                 DELETE FROM domain_text
                 WHERE rowid = ((SELECT rowid FROM workspaces WHERE id = old.workspace_id) << 40) + old.rowid;
               END""",
            """CREATE TRIGGER domain_text_update AFTER UPDATE OF apex, search_text ON domains
               WHEN old.apex IS NOT new.apex OR old.search_text IS NOT new.search_text BEGIN
                 UPDATE domain_text SET body = new.apex || char(10) || new.search_text
                 WHERE rowid = ((SELECT rowid FROM workspaces WHERE id = new.workspace_id) << 40) + new.rowid;
               END""",
            """CREATE TRIGGER domain_text_workspace_delete BEFORE DELETE ON workspaces BEGIN
                 DELETE FROM domains WHERE workspace_id = old.id;
               END""",
            """INSERT INTO domain_text (rowid, body)
               SELECT (w.rowid << 40) + d.rowid, d.apex || char(10) || d.search_text
               FROM domains d JOIN workspaces w ON w.id = d.workspace_id""",
        ],
    ),
    (
        12,
        "DNS host and one-click set-up",
        [
            # Where the domain's zone is hosted and what its Domain Connect settings offer, as JSON;
            # NULL until the first check or page view looks (core/verification/dns_host.py).
            "ALTER TABLE domains ADD COLUMN dns_host TEXT",
            # The few domains with an offer, found at once when one-click set-up is turned off.
            "CREATE INDEX domains_one_click ON domains(id) WHERE json_extract(dns_host, '$.offer') IS NOT NULL",
            # Each one-click start: a one-use state, bound to its domain, kept hashed.
            """CREATE TABLE one_click_starts (
                state_hash TEXT PRIMARY KEY,
                workspace_id TEXT NOT NULL,
                domain_id TEXT NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
                created_at TEXT NOT NULL,
                expires_at TEXT NOT NULL,
                started_by TEXT NOT NULL,
                used_at TEXT
            )""",
            "CREATE INDEX one_click_starts_expiry ON one_click_starts(expires_at)",
        ],
    ),
]


MIGRATIONS.append(
    # Rate-limit windows, the provider's budget and used sign-in states: what several processes on
    # one PostgreSQL database share (store/postgres/schema_shared.py). One SQLite process keeps them in
    # memory; 14 tells other processes which domains changed, and this one is the only writer; 15
    # counts each workspace's calls in the provider's budget, which one process counts in memory.
    (13, "state shared by service processes", []),
)
MIGRATIONS.append((14, "changes to domains told to every process", []))
MIGRATIONS.append((15, "each workspace's share of the provider's budget", []))
MIGRATIONS += BOTH
MIGRATIONS.append(ACME_SQLITE)
MIGRATIONS.append(STAND_INS)
MIGRATIONS.append(MIGRATION_19)
# 20 marks the provider calls out of the common part of the budget, which one process counts in memory.
MIGRATIONS.append((20, WORKSPACE_SHARES_GROW, []))
MIGRATIONS.append(MIGRATION_21)
MIGRATIONS.append(MIGRATION_22)
MIGRATIONS.append(MIGRATION_23)
MIGRATIONS.append(MIGRATION_24)
MIGRATIONS.append(MIGRATION_25)
MIGRATIONS.append(MIGRATION_26)
MIGRATIONS.append(MIGRATION_27)
MIGRATIONS.append(MIGRATION_28)
