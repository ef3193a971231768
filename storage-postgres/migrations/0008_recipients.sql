-- Messages to several recipients (contract §10). A message's first recipient stays in
-- messages.to_norm; every other one (cc and bcc included) gets a row here, written with the
-- message, so that `GET /v1/messages?to=` finds a message by any recipient. Messages made
-- before this migration have one recipient each: nothing to copy.
CREATE TABLE message_recipients (
    workspace_id uuid NOT NULL,
    to_norm      text NOT NULL,
    message_id   uuid NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    PRIMARY KEY (workspace_id, to_norm, message_id)
);
CREATE INDEX message_recipients_by_message ON message_recipients (message_id);
