"""Migrations 1 to 5: the schema as first released (store/migrations.py applies them with the rest).

Never edited: a change to the schema is a new migration at the end of store/migrations.py.
"""

from __future__ import annotations

Migration = tuple[int, str, list[str]]

FIRST: list[Migration] = [
    (
        1,
        "accounts and api keys",
        [
            """CREATE TABLE workspaces (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                created_at TEXT NOT NULL
            )""",
            """CREATE TABLE users (
                id TEXT PRIMARY KEY,
                email TEXT NOT NULL UNIQUE,
                issuer TEXT,
                subject TEXT,
                created_at TEXT NOT NULL,
                UNIQUE (issuer, subject)
            )""",
            """CREATE TABLE memberships (
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'operator', 'read_only')),
                created_at TEXT NOT NULL,
                PRIMARY KEY (workspace_id, user_id)
            )""",
            "CREATE INDEX memberships_user ON memberships(user_id)",
            """CREATE TABLE api_keys (
                id TEXT PRIMARY KEY,
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                name TEXT NOT NULL,
                prefix TEXT NOT NULL,
                secret_hash TEXT NOT NULL UNIQUE,
                scopes TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('active', 'revoked')),
                created_at TEXT NOT NULL,
                expires_at TEXT,
                last_used_at TEXT,
                revoked_at TEXT
            )""",
            "CREATE INDEX api_keys_prefix ON api_keys(prefix)",
            "CREATE INDEX api_keys_workspace ON api_keys(workspace_id, created_at)",
        ],
    ),
    (
        2,
        "clients, domains and ownership tokens",
        [
            # One ownership token per workspace (spec): existing workspaces get one here.
            "ALTER TABLE workspaces ADD COLUMN ownership_token TEXT",
            "UPDATE workspaces SET ownership_token = lower(hex(randomblob(16))) WHERE ownership_token IS NULL",
            """CREATE TABLE clients (
                id TEXT PRIMARY KEY,
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                name TEXT NOT NULL,
                notes TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            "CREATE INDEX clients_workspace ON clients(workspace_id, name)",
            """CREATE TABLE domains (
                id TEXT PRIMARY KEY,
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                apex TEXT NOT NULL,
                client_id TEXT REFERENCES clients(id),
                contact_email TEXT,
                notes TEXT,
                tags TEXT NOT NULL DEFAULT '[]',
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                delegation_target TEXT NOT NULL,
                validation_status TEXT NOT NULL CHECK (validation_status IN ('pending', 'verified', 'error')),
                validation_checked_at TEXT,
                validation_error TEXT,
                cert_status TEXT NOT NULL
                    CHECK (cert_status IN ('none', 'pending', 'active', 'renewing', 'error', 'blocked')),
                cert_issuer TEXT,
                cert_not_after TEXT,
                cert_next_renewal_at TEXT,
                cert_last_issued_at TEXT,
                cert_error TEXT,
                cert_trace_id TEXT,
                ops_status TEXT NOT NULL CHECK (ops_status IN ('active', 'action_needed', 'blocked', 'pending')),
                UNIQUE (workspace_id, apex)
            )""",
            # One index per sort order, and per equality filter combined with the default sort.
            "CREATE INDEX domains_created ON domains(workspace_id, created_at, id)",
            "CREATE INDEX domains_updated ON domains(workspace_id, updated_at, id)",
            "CREATE INDEX domains_ops ON domains(workspace_id, ops_status, created_at, id)",
            "CREATE INDEX domains_validation ON domains(workspace_id, validation_status, created_at, id)",
            "CREATE INDEX domains_cert ON domains(workspace_id, cert_status, created_at, id)",
            "CREATE INDEX domains_client ON domains(client_id, created_at, id)",
            # Tags, with the domain's statuses copied in (kept in step by a trigger) so that a
            # tag + status filter is counted from one index range instead of a table scan.
            """CREATE TABLE domain_tags (
                domain_id TEXT NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
                workspace_id TEXT NOT NULL,
                tag TEXT NOT NULL,
                ops_status TEXT NOT NULL,
                validation_status TEXT NOT NULL,
                cert_status TEXT NOT NULL,
                PRIMARY KEY (domain_id, tag)
            )""",
            "CREATE INDEX domain_tags_ops ON domain_tags(workspace_id, tag, ops_status)",
            "CREATE INDEX domain_tags_validation ON domain_tags(workspace_id, tag, validation_status)",
            "CREATE INDEX domain_tags_cert ON domain_tags(workspace_id, tag, cert_status)",
            """CREATE TRIGGER domain_tags_statuses AFTER UPDATE OF ops_status, validation_status, cert_status ON domains
               WHEN old.ops_status IS NOT new.ops_status OR old.validation_status IS NOT new.validation_status
                    OR old.cert_status IS NOT new.cert_status
               BEGIN
                 UPDATE domain_tags SET ops_status = new.ops_status, validation_status = new.validation_status,
                        cert_status = new.cert_status WHERE domain_id = new.id;
               END""",
            # Domains per workspace and status combination, kept exact by triggers in the same
            # transaction as every write, so a status-only query never counts rows.
            """CREATE TABLE domain_counts (
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                ops_status TEXT NOT NULL,
                validation_status TEXT NOT NULL,
                cert_status TEXT NOT NULL,
                n INTEGER NOT NULL,
                PRIMARY KEY (workspace_id, ops_status, validation_status, cert_status)
            ) WITHOUT ROWID""",
            """CREATE TRIGGER domain_counts_insert AFTER INSERT ON domains BEGIN
                 INSERT INTO domain_counts VALUES (new.workspace_id, new.ops_status, new.validation_status, new.cert_status, 1)
                 ON CONFLICT DO UPDATE SET n = n + 1;
               END""",
            """CREATE TRIGGER domain_counts_delete AFTER DELETE ON domains BEGIN
                 UPDATE domain_counts SET n = n - 1 WHERE workspace_id = old.workspace_id
                   AND ops_status = old.ops_status AND validation_status = old.validation_status
                   AND cert_status = old.cert_status;
               END""",
            """CREATE TRIGGER domain_counts_update AFTER UPDATE OF ops_status, validation_status, cert_status ON domains
               WHEN old.ops_status IS NOT new.ops_status OR old.validation_status IS NOT new.validation_status
                    OR old.cert_status IS NOT new.cert_status
               BEGIN
                 UPDATE domain_counts SET n = n - 1 WHERE workspace_id = old.workspace_id
                   AND ops_status = old.ops_status AND validation_status = old.validation_status
                   AND cert_status = old.cert_status;
                 INSERT INTO domain_counts VALUES (new.workspace_id, new.ops_status, new.validation_status, new.cert_status, 1)
                 ON CONFLICT DO UPDATE SET n = n + 1;
               END""",
        ],
    ),
    (
        3,
        "team invitations",
        [
            """CREATE TABLE invitations (
                id TEXT PRIMARY KEY,
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                email TEXT NOT NULL,
                role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'operator', 'read_only')),
                created_at TEXT NOT NULL,
                invited_by TEXT REFERENCES users(id) ON DELETE SET NULL,
                UNIQUE (workspace_id, email)
            )""",
            "CREATE INDEX invitations_email ON invitations(email)",
        ],
    ),
    (
        4,
        "certificates, event outbox and idempotency records",
        [
            """CREATE TABLE certificates (
                id TEXT PRIMARY KEY,
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                domain_id TEXT NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
                apex TEXT NOT NULL,
                wildcard INTEGER NOT NULL DEFAULT 0,
                status TEXT NOT NULL CHECK (status IN ('pending', 'active', 'error')),
                issuer TEXT NOT NULL,
                provider TEXT NOT NULL,
                not_before TEXT,
                not_after TEXT,
                provider_certificate_id TEXT,
                provider_hostname_id TEXT,
                provider_ssl_id TEXT,
                provider_status TEXT,
                provider_hostname_status TEXT,
                last_checked_at TEXT,
                last_error TEXT,
                created_at TEXT NOT NULL
            )""",
            # Newest first per domain (certificate query), and the latest one (issuance).
            "CREATE INDEX certificates_domain ON certificates(domain_id, created_at, id)",
            # Transactional outbox: an event is written in the transaction of the state change
            # it reports; webhook fan-out marks it dispatched later.
            """CREATE TABLE outbox_events (
                id TEXT PRIMARY KEY,
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                type TEXT NOT NULL,
                data TEXT NOT NULL,
                created_at TEXT NOT NULL,
                dispatched_at TEXT
            )""",
            "CREATE INDEX outbox_undispatched ON outbox_events(created_at) WHERE dispatched_at IS NULL",
            """CREATE TABLE idempotency_keys (
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                method TEXT NOT NULL,
                path TEXT NOT NULL,
                key TEXT NOT NULL,
                fingerprint TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),
                locked_until TEXT,
                status_code INTEGER,
                response TEXT,
                created_at TEXT NOT NULL,
                PRIMARY KEY (workspace_id, method, path, key)
            )""",
            "CREATE INDEX idempotency_created ON idempotency_keys(created_at)",
        ],
    ),
    (
        5,
        "webhook endpoints, deliveries and attempts",
        [
            """CREATE TABLE webhook_endpoints (
                id TEXT PRIMARY KEY,
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                url TEXT NOT NULL,
                events TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('active', 'disabled')),
                secret_ciphertext TEXT NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                last_delivery_at TEXT,
                last_status_code INTEGER
            )""",
            "CREATE INDEX webhook_endpoints_workspace ON webhook_endpoints(workspace_id, created_at, id)",
            # One row per (event, endpoint); its id is the envelope id, stable across retries.
            # Deleting an endpoint deletes its deliveries (queued ones included).
            """CREATE TABLE webhook_deliveries (
                id TEXT PRIMARY KEY,
                workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
                endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
                event_id TEXT NOT NULL,
                type TEXT NOT NULL,
                data TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at TEXT,
                created_at TEXT NOT NULL,
                last_attempt_at TEXT,
                last_status_code INTEGER,
                last_error TEXT,
                UNIQUE (event_id, endpoint_id)
            )""",
            "CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE status = 'pending'",
            "CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries(endpoint_id, created_at, id)",
            """CREATE TABLE webhook_attempts (
                delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
                number INTEGER NOT NULL,
                started_at TEXT NOT NULL,
                duration_ms INTEGER NOT NULL,
                status_code INTEGER,
                error TEXT,
                PRIMARY KEY (delivery_id, number)
            ) WITHOUT ROWID""",
        ],
    ),
]

