-- Delivery-site admission (direct delivery by site, docs/decisions.md), shared by every node
-- on this database (src/site_limits.rs): per site its rate bucket, suspension and throttle,
-- and the connection leases its deliveries hold.
--
-- UNLOGGED, as the send rate limits of 0002_limits.sql: every delivery updates its site's
-- bucket and writes a lease, and that must cost no WAL and no fsync. After a crash PostgreSQL
-- empties these tables, which only loses what is short-lived anyway: buckets start full,
-- leases are gone (the claims they belonged to end on their own), and suspensions and
-- throttles end early (an adaptive rule sets them again at the site's next such reply).
--
-- Times are nanoseconds since the Unix epoch, as the buckets of 0002, so that every answer
-- is the exact time the in-memory limits give. Site keys compare byte by byte (COLLATE "C"),
-- as `SiteKey` orders them.

-- Per site: the GCRA "theoretical arrival time" of its bucket (0 or any time before now: full),
-- the end and reason of a suspension, and the lowered rate, end and reason of a throttle. A
-- row whose bucket is full and whose suspension and throttle are over limits nothing: the
-- purge deletes it.
CREATE UNLOGGED TABLE delivery_sites (
    site            text COLLATE "C" PRIMARY KEY,
    tat             bigint NOT NULL DEFAULT 0,
    suspended_until bigint,
    suspend_reason  text,
    throttle_count  integer CHECK (throttle_count BETWEEN 1 AND 1000000),
    throttle_period text CHECK (throttle_period IN ('s', 'min', 'h')),
    throttle_until  bigint,
    throttle_reason text,
    CHECK ((suspended_until IS NULL) = (suspend_reason IS NULL)),
    CHECK ((throttle_until IS NULL) = (throttle_count IS NULL)
       AND (throttle_until IS NULL) = (throttle_period IS NULL)
       AND (throttle_until IS NULL) = (throttle_reason IS NULL))
);

-- Per site, its connection leases: a delivery in flight or a connection kept idle, held until
-- `held_until` unless released. A lease past its time counts no more; admissions and the
-- purge delete it.
CREATE UNLOGGED TABLE delivery_site_leases (
    site       text COLLATE "C" NOT NULL,
    lease      uuid NOT NULL,
    held_until bigint NOT NULL,
    PRIMARY KEY (site, lease)
);
