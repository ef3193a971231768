-- The webhook deliveries a message caused, newest first (the dashboard's message page).
-- An expression index over the stored document: rows written before it are covered too,
-- and the write path is unchanged.
CREATE INDEX deliveries_by_message ON webhook_deliveries (workspace_id, (doc->>'message_id'), id DESC)
    WHERE doc->>'message_id' IS NOT NULL;
