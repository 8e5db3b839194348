"""The schema on PostgreSQL: migration for migration the SQLite schema's, with the same numbers.

Same tables, columns and meanings, so the repositories' SQL runs on both. Where SQLite has a
feature PostgreSQL spells differently, it is spelled here:

- text is ``COLLATE "C"`` (byte order, as SQLite compares), whatever the database's locale, so
  keyset pages and sort orders are the same on both;
- timestamps stay ISO-8601 text, as on SQLite: the repositories compare and sort them as text;
- ``rowid`` where SQL reads it (memberships, verification links, reminders) is an identity column
  of that name;
- the trigger-kept counters are PL/pgSQL triggers;
- ``q`` is answered by ``LIKE`` on trigram indexes (pg_trgm) of the apex and the folded text,
  where SQLite has its FTS5 trigram table (migration 11).

A database is never edited by hand: a new migration is added to both lists, with one number.
"""

from __future__ import annotations

from store.postgres.schema_shared import MIGRATION_20_PG, SHARED_MIGRATIONS, T
from store.schema_19 import POSTGRES as MIGRATION_19
from store.schema_21 import POSTGRES as MIGRATION_21
from store.schema_22 import POSTGRES as MIGRATION_22
from store.schema_23 import POSTGRES as MIGRATION_23
from store.schema_24 import POSTGRES as MIGRATION_24
from store.schema_25 import POSTGRES as MIGRATION_25
from store.schema_26 import POSTGRES as MIGRATION_26
from store.schema_27 import POSTGRES as MIGRATION_27
from store.schema_28 import POSTGRES as MIGRATION_28
from store.schema_acme import ACME_PG
from store.schema_both import BOTH, STAND_INS
from store.sqlite.schema_v1 import Migration

_COUNT_TRIGGERS = [
    # domain_tags copies the domain's statuses; domain_counts and tag_counts count them.
    """CREATE FUNCTION cps_domain_statuses() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE domain_counts SET n = n - 1 WHERE workspace_id = OLD.workspace_id
              AND ops_status = OLD.ops_status AND validation_status = OLD.validation_status
              AND cert_status = OLD.cert_status;
          END IF;
          IF TG_OP IN ('UPDATE', 'INSERT') THEN
            INSERT INTO domain_counts VALUES (NEW.workspace_id, NEW.ops_status, NEW.validation_status, NEW.cert_status, 1)
            ON CONFLICT (workspace_id, ops_status, validation_status, cert_status) DO UPDATE SET n = domain_counts.n + 1;
          END IF;
          IF TG_OP = 'UPDATE' THEN
            UPDATE domain_tags SET ops_status = NEW.ops_status, validation_status = NEW.validation_status,
                   cert_status = NEW.cert_status WHERE domain_id = NEW.id;
          END IF;
          RETURN NULL;
        END $$""",
    """CREATE TRIGGER domain_counts_insert AFTER INSERT ON domains
       FOR EACH ROW EXECUTE FUNCTION cps_domain_statuses()""",
    """CREATE TRIGGER domain_counts_delete AFTER DELETE ON domains
       FOR EACH ROW EXECUTE FUNCTION cps_domain_statuses()""",
    """CREATE TRIGGER domain_counts_update AFTER UPDATE OF ops_status, validation_status, cert_status ON domains
       FOR EACH ROW WHEN (OLD.ops_status IS DISTINCT FROM NEW.ops_status
                          OR OLD.validation_status IS DISTINCT FROM NEW.validation_status
                          OR OLD.cert_status IS DISTINCT FROM NEW.cert_status)
       EXECUTE FUNCTION cps_domain_statuses()""",
]

_TAG_COUNT_TRIGGERS = [
    """CREATE FUNCTION cps_tag_counts() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE tag_counts SET n = n - 1 WHERE workspace_id = OLD.workspace_id AND tag = OLD.tag
              AND ops_status = OLD.ops_status AND validation_status = OLD.validation_status
              AND cert_status = OLD.cert_status;
          END IF;
          IF TG_OP IN ('UPDATE', 'INSERT') THEN
            INSERT INTO tag_counts VALUES (NEW.workspace_id, NEW.tag, NEW.ops_status, NEW.validation_status,
                                           NEW.cert_status, 1)
            ON CONFLICT (workspace_id, tag, ops_status, validation_status, cert_status)
            DO UPDATE SET n = tag_counts.n + 1;
          END IF;
          RETURN NULL;
        END $$""",
    "CREATE TRIGGER tag_counts_insert AFTER INSERT ON domain_tags FOR EACH ROW EXECUTE FUNCTION cps_tag_counts()",
    "CREATE TRIGGER tag_counts_delete AFTER DELETE ON domain_tags FOR EACH ROW EXECUTE FUNCTION cps_tag_counts()",
    """CREATE TRIGGER tag_counts_update AFTER UPDATE OF ops_status, validation_status, cert_status ON domain_tags
       FOR EACH ROW EXECUTE FUNCTION cps_tag_counts()""",
]

MIGRATIONS_PG: list[Migration] = [
    (1, "accounts and api keys", [
        f"""CREATE TABLE workspaces (
            id {T} PRIMARY KEY,
            name {T} NOT NULL,
            created_at {T} NOT NULL
        )""",
        f"""CREATE TABLE users (
            id {T} PRIMARY KEY,
            email {T} NOT NULL UNIQUE,
            issuer {T},
            subject {T},
            created_at {T} NOT NULL,
            UNIQUE (issuer, subject)
        )""",
        f"""CREATE TABLE memberships (
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            user_id {T} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            role {T} NOT NULL CHECK (role IN ('owner', 'admin', 'operator', 'read_only')),
            created_at {T} NOT NULL,
            rowid BIGINT GENERATED BY DEFAULT AS IDENTITY,
            PRIMARY KEY (workspace_id, user_id)
        )""",
        "CREATE INDEX memberships_user ON memberships(user_id)",
        f"""CREATE TABLE api_keys (
            id {T} PRIMARY KEY,
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            name {T} NOT NULL,
            prefix {T} NOT NULL,
            secret_hash {T} NOT NULL UNIQUE,
            scopes {T} NOT NULL,
            status {T} NOT NULL CHECK (status IN ('active', 'revoked')),
            created_at {T} NOT NULL,
            expires_at {T},
            last_used_at {T},
            revoked_at {T}
        )""",
        "CREATE INDEX api_keys_prefix ON api_keys(prefix)",
        "CREATE INDEX api_keys_workspace ON api_keys(workspace_id, created_at)",
    ]),
    (2, "clients, domains and ownership tokens", [
        f"ALTER TABLE workspaces ADD COLUMN ownership_token {T}",
        "UPDATE workspaces SET ownership_token = md5(random()::text) WHERE ownership_token IS NULL",
        f"""CREATE TABLE clients (
            id {T} PRIMARY KEY,
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            name {T} NOT NULL,
            notes {T},
            created_at {T} NOT NULL,
            updated_at {T} NOT NULL
        )""",
        "CREATE INDEX clients_workspace ON clients(workspace_id, name)",
        f"""CREATE TABLE domains (
            id {T} PRIMARY KEY,
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            apex {T} NOT NULL,
            client_id {T} REFERENCES clients(id),
            contact_email {T},
            notes {T},
            tags {T} NOT NULL DEFAULT '[]',
            created_at {T} NOT NULL,
            updated_at {T} NOT NULL,
            delegation_target {T} NOT NULL,
            validation_status {T} NOT NULL CHECK (validation_status IN ('pending', 'verified', 'error')),
            validation_checked_at {T},
            validation_error {T},
            cert_status {T} NOT NULL
                CHECK (cert_status IN ('none', 'pending', 'active', 'renewing', 'error', 'blocked')),
            cert_issuer {T},
            cert_not_after {T},
            cert_next_renewal_at {T},
            cert_last_issued_at {T},
            cert_error {T},
            cert_trace_id {T},
            ops_status {T} NOT NULL CHECK (ops_status IN ('active', 'action_needed', 'blocked', 'pending')),
            UNIQUE (workspace_id, apex)
        )""",
        "CREATE INDEX domains_created ON domains(workspace_id, created_at, id)",
        "CREATE INDEX domains_updated ON domains(workspace_id, updated_at, id)",
        "CREATE INDEX domains_ops ON domains(workspace_id, ops_status, created_at, id)",
        "CREATE INDEX domains_validation ON domains(workspace_id, validation_status, created_at, id)",
        "CREATE INDEX domains_cert ON domains(workspace_id, cert_status, created_at, id)",
        "CREATE INDEX domains_client ON domains(client_id, created_at, id)",
        f"""CREATE TABLE domain_tags (
            domain_id {T} NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
            workspace_id {T} NOT NULL,
            tag {T} NOT NULL,
            ops_status {T} NOT NULL,
            validation_status {T} NOT NULL,
            cert_status {T} NOT NULL,
            PRIMARY KEY (domain_id, tag)
        )""",
        "CREATE INDEX domain_tags_ops ON domain_tags(workspace_id, tag, ops_status)",
        "CREATE INDEX domain_tags_validation ON domain_tags(workspace_id, tag, validation_status)",
        "CREATE INDEX domain_tags_cert ON domain_tags(workspace_id, tag, cert_status)",
        f"""CREATE TABLE domain_counts (
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            ops_status {T} NOT NULL,
            validation_status {T} NOT NULL,
            cert_status {T} NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (workspace_id, ops_status, validation_status, cert_status)
        )""",
        *_COUNT_TRIGGERS,
    ]),
    (3, "team invitations", [
        f"""CREATE TABLE invitations (
            id {T} PRIMARY KEY,
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            email {T} NOT NULL,
            role {T} NOT NULL CHECK (role IN ('owner', 'admin', 'operator', 'read_only')),
            created_at {T} NOT NULL,
            invited_by {T} REFERENCES users(id) ON DELETE SET NULL,
            UNIQUE (workspace_id, email)
        )""",
        "CREATE INDEX invitations_email ON invitations(email)",
    ]),
    (4, "certificates, event outbox and idempotency records", [
        f"""CREATE TABLE certificates (
            id {T} PRIMARY KEY,
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            domain_id {T} NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
            apex {T} NOT NULL,
            wildcard INTEGER NOT NULL DEFAULT 0,
            status {T} NOT NULL CHECK (status IN ('pending', 'active', 'error')),
            issuer {T} NOT NULL,
            provider {T} NOT NULL,
            not_before {T},
            not_after {T},
            provider_certificate_id {T},
            provider_hostname_id {T},
            provider_ssl_id {T},
            provider_status {T},
            provider_hostname_status {T},
            last_checked_at {T},
            last_error {T},
            created_at {T} NOT NULL
        )""",
        "CREATE INDEX certificates_domain ON certificates(domain_id, created_at, id)",
        f"""CREATE TABLE outbox_events (
            id {T} PRIMARY KEY,
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            type {T} NOT NULL,
            data {T} NOT NULL,
            created_at {T} NOT NULL,
            dispatched_at {T}
        )""",
        "CREATE INDEX outbox_undispatched ON outbox_events(created_at) WHERE dispatched_at IS NULL",
        f"""CREATE TABLE idempotency_keys (
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            method {T} NOT NULL,
            path {T} NOT NULL,
            key {T} NOT NULL,
            fingerprint {T} NOT NULL,
            state {T} NOT NULL CHECK (state IN ('in_progress', 'completed')),
            locked_until {T},
            status_code INTEGER,
            response {T},
            created_at {T} NOT NULL,
            PRIMARY KEY (workspace_id, method, path, key)
        )""",
        "CREATE INDEX idempotency_created ON idempotency_keys(created_at)",
    ]),
    (5, "webhook endpoints, deliveries and attempts", [
        f"""CREATE TABLE webhook_endpoints (
            id {T} PRIMARY KEY,
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            url {T} NOT NULL,
            events {T} NOT NULL,
            status {T} NOT NULL CHECK (status IN ('active', 'disabled')),
            secret_ciphertext {T} NOT NULL,
            created_at {T} NOT NULL,
            updated_at {T} NOT NULL,
            last_delivery_at {T},
            last_status_code INTEGER
        )""",
        "CREATE INDEX webhook_endpoints_workspace ON webhook_endpoints(workspace_id, created_at, id)",
        f"""CREATE TABLE webhook_deliveries (
            id {T} PRIMARY KEY,
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            endpoint_id {T} NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
            event_id {T} NOT NULL,
            type {T} NOT NULL,
            data {T} NOT NULL,
            status {T} NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at {T},
            created_at {T} NOT NULL,
            last_attempt_at {T},
            last_status_code INTEGER,
            last_error {T},
            UNIQUE (event_id, endpoint_id)
        )""",
        "CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE status = 'pending'",
        "CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries(endpoint_id, created_at, id)",
        f"""CREATE TABLE webhook_attempts (
            delivery_id {T} NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
            number INTEGER NOT NULL,
            started_at {T} NOT NULL,
            duration_ms INTEGER NOT NULL,
            status_code INTEGER,
            error {T},
            PRIMARY KEY (delivery_id, number)
        )""",
    ]),
    (6, "verification links", [
        f"""CREATE TABLE verification_links (
            id {T} PRIMARY KEY,
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            domain_id {T} NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
            token_hash {T} NOT NULL UNIQUE,
            token_ciphertext {T} NOT NULL,
            recipient_email {T},
            created_at {T} NOT NULL,
            expires_at {T} NOT NULL,
            last_reminded_at {T},
            revoked_at {T},
            rowid BIGINT GENERATED BY DEFAULT AS IDENTITY
        )""",
        "CREATE INDEX verification_links_workspace ON verification_links(workspace_id, created_at)",
        "CREATE INDEX verification_links_domain ON verification_links(domain_id, created_at)",
    ]),
    (7, "tag counts", [
        f"""CREATE TABLE tag_counts (
            workspace_id {T} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            tag {T} NOT NULL,
            ops_status {T} NOT NULL,
            validation_status {T} NOT NULL,
            cert_status {T} NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (workspace_id, tag, ops_status, validation_status, cert_status)
        )""",
        """INSERT INTO tag_counts
           SELECT workspace_id, tag, ops_status, validation_status, cert_status, count(*) FROM domain_tags
           GROUP BY workspace_id, tag, ops_status, validation_status, cert_status""",
        *_TAG_COUNT_TRIGGERS,
    ]),
    (8, "folded search text", [
        # Filled in by the store with every write (store.domains.search_text); a PostgreSQL
        # database starts empty (copy-to-postgres brings the column with the rows).
        f"ALTER TABLE domains ADD COLUMN search_text {T} NOT NULL DEFAULT ''",
    ]),
    (9, "reminders sent, by recipient", [
        f"""CREATE TABLE reminder_sends (
            recipient {T} NOT NULL,
            sent_at {T} NOT NULL,
            rowid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY
        )""",
        "CREATE INDEX reminder_sends_recipient ON reminder_sends(recipient, sent_at)",
    ]),
    (10, "lifecycle: check schedule, drift, announced events", [
        f"ALTER TABLE domains ADD COLUMN next_check_at {T}",
        "ALTER TABLE domains ADD COLUMN check_step INTEGER NOT NULL DEFAULT 0",
        f"ALTER TABLE domains ADD COLUMN checks_since {T}",
        "CREATE INDEX domains_next_check ON domains(next_check_at) WHERE next_check_at IS NOT NULL",
        f"ALTER TABLE domains ADD COLUMN drift {T}",
        f"ALTER TABLE domains ADD COLUMN drift_since {T}",
        "CREATE INDEX domains_drifted ON domains(id) WHERE drift IS NOT NULL",
        f"ALTER TABLE certificates ADD COLUMN announced {T} NOT NULL DEFAULT ''",
    ]),
    (11, "free-text index", [
        # ``q`` is LIKE '%q%' on the apex or the folded notes and tags; trigram indexes answer it
        # exactly (the index finds candidates, LIKE checks them). pg_trgm is a trusted extension:
        # the database's owner may create it.
        "CREATE EXTENSION IF NOT EXISTS pg_trgm",
        "CREATE INDEX domains_apex_text ON domains USING gin (apex gin_trgm_ops)",
        "CREATE INDEX domains_search_text ON domains USING gin (search_text gin_trgm_ops)",
    ]),
    (12, "DNS host and one-click set-up", [
        f"ALTER TABLE domains ADD COLUMN dns_host {T}",
        "CREATE INDEX domains_one_click ON domains(id) WHERE (dns_host::jsonb ->> 'offer') IS NOT NULL",
        f"""CREATE TABLE one_click_starts (
            state_hash {T} PRIMARY KEY,
            workspace_id {T} NOT NULL,
            domain_id {T} NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
            created_at {T} NOT NULL,
            expires_at {T} NOT NULL,
            started_by {T} NOT NULL,
            used_at {T}
        )""",
        "CREATE INDEX one_click_starts_expiry ON one_click_starts(expires_at)",
    ]),
]

MIGRATIONS_PG += SHARED_MIGRATIONS
MIGRATIONS_PG += BOTH
MIGRATIONS_PG.append(ACME_PG)
MIGRATIONS_PG.append(STAND_INS)
MIGRATIONS_PG.append(MIGRATION_19)
MIGRATIONS_PG.append(MIGRATION_20_PG)
MIGRATIONS_PG.append(MIGRATION_21)
MIGRATIONS_PG.append(MIGRATION_22)
MIGRATIONS_PG.append(MIGRATION_23)
MIGRATIONS_PG.append(MIGRATION_24)
MIGRATIONS_PG.append(MIGRATION_25)
MIGRATIONS_PG.append(MIGRATION_26)
MIGRATIONS_PG.append(MIGRATION_27)
MIGRATIONS_PG.append(MIGRATION_28)
