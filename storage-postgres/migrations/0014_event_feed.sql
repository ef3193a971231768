-- The event feed (EventFeedStore): each event row names its workspace and the transaction
-- that wrote it. A reader takes only rows of transactions older than every transaction
-- still running (pg_snapshot_xmin), in (transaction, id) order: a transaction that commits
-- later can then never add a row before a position already handed out, whatever its ids.
-- Rows written before this migration have neither and are not in the feed. No default
-- on the workspace (it is written with the event); the transaction id's default applies to
-- new rows only, so adding it rewrites nothing.
ALTER TABLE message_events ADD COLUMN workspace_id uuid, ADD COLUMN feed_xid xid8;
ALTER TABLE message_events ALTER COLUMN feed_xid SET DEFAULT pg_current_xact_id();
CREATE INDEX message_events_feed ON message_events (workspace_id, feed_xid, id) WHERE workspace_id IS NOT NULL;
