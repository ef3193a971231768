-- The send rate limits and the failed-authentication throttle (docs/api.md#authentication),
-- shared by every node on this database (src/limits.rs).
--
-- UNLOGGED: changes write no WAL, so the update every send makes costs no fsync. After a
-- crash PostgreSQL empties these tables, which only means full buckets and fresh throttle
-- windows. No secondary indexes: the purge scans these small tables, and an index on a
-- column every send updates would make each update a non-HOT one.

-- Per API key, the GCRA form of its token bucket: the "theoretical arrival time" in
-- nanoseconds since the Unix epoch. A send is allowed while max(tat, now) + T - now ≤ 1 s,
-- where T = 1 s / rateLimitPerSec; the bucket is full once tat ≤ now.
CREATE UNLOGGED TABLE send_rate_limits (
    key_id uuid PRIMARY KEY,
    tat    bigint NOT NULL
);

-- Per client address, its current failed-authentication window: when it started (ns since
-- the Unix epoch) and how many failures it holds.
CREATE UNLOGGED TABLE auth_failures (
    client   inet PRIMARY KEY,
    started  bigint NOT NULL,
    failures integer NOT NULL
);
