-- Dashboard sessions, found by the SHA-256 of the cookie's token (the token itself is never
-- stored). `expires_at` moves with each touch; the purge walks its index earliest first.

CREATE TABLE sessions (
    token_hash   bytea PRIMARY KEY,
    id           uuid NOT NULL UNIQUE,
    last_seen_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    doc          jsonb NOT NULL
);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);
