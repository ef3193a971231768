-- Settings that every node on the database shares. Today the secrets of the store (the key
-- that signs tracking links): each written once by `ensure_secret`
-- (`INSERT … ON CONFLICT DO NOTHING`, then read) and never changed.

CREATE TABLE secrets (
    name  text PRIMARY KEY,
    value bytea NOT NULL
);
