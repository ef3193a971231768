-- Secrets are sealed at rest with a key kept outside the database (see the crate docs). This
-- row holds a value only that key opens, checked by every node at start, so that a node
-- given another key fails to start instead of failing later.

CREATE TABLE sealing (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    key_check bytea NOT NULL
);
