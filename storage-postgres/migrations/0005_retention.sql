-- Retention (`purge_message_content`): whether a message was written since its last purge.
-- `record_event` sets it again, so late events and a body written back by a racing update
-- are purged too. Existing messages start pending: none has been purged yet. The partial
-- index holds only pending messages, in id (= creation) order, so a purge never reads the
-- ones it already did.
ALTER TABLE messages ADD COLUMN purge_pending boolean NOT NULL DEFAULT true;
CREATE INDEX messages_purge_pending ON messages (id) WHERE purge_pending;
