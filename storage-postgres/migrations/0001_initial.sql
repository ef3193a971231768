-- Tidings on PostgreSQL: every record is a JSONB `doc` (the serde form of the core model,
-- which stays the source of truth) plus the real columns that lists, claims and uniqueness
-- rules query. Ids are UUIDs holding the ULID's 16 bytes: PostgreSQL compares UUIDs bytewise,
-- so `ORDER BY id DESC` is newest first.

CREATE TABLE workspaces (
    id  uuid PRIMARY KEY,
    doc jsonb NOT NULL
);

CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    key_hash     bytea NOT NULL UNIQUE,
    revoked      boolean NOT NULL,
    doc          jsonb NOT NULL
);
CREATE INDEX api_keys_live ON api_keys (workspace_id, id DESC) WHERE NOT revoked;

CREATE TABLE messages (
    id              uuid PRIMARY KEY,
    workspace_id    uuid NOT NULL,
    status          text NOT NULL,
    to_norm         text NOT NULL,
    api_key_id      uuid NOT NULL,
    next_attempt_at timestamptz,
    doc             jsonb NOT NULL
);
CREATE INDEX messages_by_workspace ON messages (workspace_id, id DESC);
CREATE INDEX messages_by_status ON messages (workspace_id, status, id DESC);
CREATE INDEX messages_by_to ON messages (workspace_id, to_norm, id DESC);
CREATE INDEX messages_by_key ON messages (workspace_id, api_key_id, id DESC);
CREATE INDEX messages_due ON messages (next_attempt_at, id) WHERE next_attempt_at IS NOT NULL;

CREATE TABLE message_events (
    message_id uuid NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    id         uuid NOT NULL,
    doc        jsonb NOT NULL,
    PRIMARY KEY (message_id, id)
);

CREATE TABLE idempotency (
    workspace_id uuid NOT NULL,
    key          text NOT NULL,
    expires_at   timestamptz NOT NULL,
    doc          jsonb NOT NULL,
    PRIMARY KEY (workspace_id, key)
);
CREATE INDEX idempotency_expiry ON idempotency (expires_at);

CREATE TABLE domains (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    name         text NOT NULL,
    verified     boolean NOT NULL,
    -- last_checked_at, or created_at if never checked: what re-verification orders by.
    checked_at   timestamptz NOT NULL,
    doc          jsonb NOT NULL,
    UNIQUE (workspace_id, name)
);
CREATE INDEX domains_by_workspace ON domains (workspace_id, id DESC);
CREATE INDEX domains_to_recheck ON domains (checked_at, id) WHERE NOT verified;

CREATE TABLE senders (
    id             uuid PRIMARY KEY,
    workspace_id   uuid NOT NULL,
    domain_id      uuid NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    username_lower text NOT NULL,
    doc            jsonb NOT NULL,
    UNIQUE (domain_id, username_lower)
);
CREATE INDEX senders_by_domain ON senders (workspace_id, domain_id, id DESC);

CREATE TABLE templates (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    doc          jsonb NOT NULL
);
CREATE INDEX templates_by_workspace ON templates (workspace_id, id DESC);

-- Which template holds a version (the versions themselves are in the template's doc).
CREATE TABLE template_versions (
    id          uuid PRIMARY KEY,
    template_id uuid NOT NULL REFERENCES templates (id) ON DELETE CASCADE
);
CREATE INDEX template_versions_by_template ON template_versions (template_id);

CREATE TABLE suppressions (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    email_norm   text NOT NULL,
    reason       text NOT NULL,
    doc          jsonb NOT NULL,
    UNIQUE (workspace_id, email_norm)
);
CREATE INDEX suppressions_by_workspace ON suppressions (workspace_id, id DESC);
CREATE INDEX suppressions_by_reason ON suppressions (workspace_id, reason, id DESC);

CREATE TABLE webhooks (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    enabled      boolean NOT NULL,
    doc          jsonb NOT NULL
);
CREATE INDEX webhooks_by_workspace ON webhooks (workspace_id, id DESC);

CREATE TABLE webhook_deliveries (
    id              uuid PRIMARY KEY,
    workspace_id    uuid NOT NULL,
    endpoint_id     uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    status          text NOT NULL,
    next_attempt_at timestamptz,
    doc             jsonb NOT NULL
);
CREATE INDEX deliveries_by_endpoint ON webhook_deliveries (workspace_id, endpoint_id, id DESC);
CREATE INDEX deliveries_by_endpoint_fk ON webhook_deliveries (endpoint_id);
-- The claim reads endpoint_id from the index to apply the per-endpoint quota.
CREATE INDEX deliveries_due ON webhook_deliveries (next_attempt_at, id) INCLUDE (endpoint_id)
    WHERE next_attempt_at IS NOT NULL;
