-- Inbound mail (contract §13): a workspace's routes, the messages its inbound domains
-- received with their raw bytes, and what those take of its quota.

-- `matcher` is `RouteMatch::normalized`: one route per matcher and workspace.
CREATE TABLE inbound_routes (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    matcher      text NOT NULL,
    doc          jsonb NOT NULL,
    UNIQUE (workspace_id, matcher)
);

-- `doc` is the message without its raw bytes, which `raw` holds (stored out of line once
-- large, so a list that selects `doc` does not read them). `doc` is `json`, not `jsonb`:
-- a received body may hold U+0000, which `jsonb` (and `text`) refuse, and nothing queries
-- inside it. The columns beside it are what the filters of a list and retention query:
-- `recipients`, the envelope's recipients normalized; `from_address`, the `From` address
-- ASCII-lower-cased as UTF-8 bytes (it is as written, NUL included; NULL without one);
-- `stored_bytes`, what the message counts toward the quota, given back when it is purged.
CREATE TABLE inbound_messages (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    received_at  timestamptz NOT NULL,
    recipients   text[] NOT NULL,
    from_address bytea,
    stored_bytes bigint NOT NULL,
    doc          json NOT NULL,
    raw          bytea NOT NULL
);
CREATE INDEX inbound_messages_by_workspace ON inbound_messages (workspace_id, id DESC);
CREATE INDEX inbound_messages_by_recipient ON inbound_messages USING gin (recipients);
CREATE INDEX inbound_messages_by_received ON inbound_messages (received_at, id);

-- The sums of each workspace's `inbound_messages`, kept in the transaction of every insert
-- and purge; an insert locks its workspace's row to check the quota against it.
CREATE TABLE inbound_usage (
    workspace_id uuid PRIMARY KEY,
    messages     bigint NOT NULL,
    bytes        bigint NOT NULL
);
