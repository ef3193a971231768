-- Activity counters (docs/decisions.md, "Activity counters"): per workspace, UTC hour and
-- sending domain, what happened to its recipients. Written in the same statement as the
-- messages and events they count (`message_writes.rs`), summed per row for a whole group
-- and upserted once per row, so a hot row is locked once per group, not once per event.
-- Named 0010: 0009 is taken by the search indexes of another branch. Counters start empty
-- at upgrade: mail sent before counts nowhere (the overview says what its ranges cover).
CREATE TABLE activity_hours (
    workspace_id            uuid        NOT NULL,
    hour                    timestamptz NOT NULL,
    domain_id               uuid        NOT NULL,
    accepted                bigint      NOT NULL DEFAULT 0,
    delivered               bigint      NOT NULL DEFAULT 0,
    delivered_open_tracked  bigint      NOT NULL DEFAULT 0,
    delivered_click_tracked bigint      NOT NULL DEFAULT 0,
    hard_bounced            bigint      NOT NULL DEFAULT 0,
    soft_bounced            bigint      NOT NULL DEFAULT 0,
    complained              bigint      NOT NULL DEFAULT 0,
    opened                  bigint      NOT NULL DEFAULT 0,
    clicked                 bigint      NOT NULL DEFAULT 0,
    suppressed              bigint      NOT NULL DEFAULT 0,
    failed                  bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_id, hour, domain_id)
);
-- The purge takes the oldest hours of every workspace.
CREATE INDEX activity_hours_by_hour ON activity_hours (hour);
