-- Tags and metadata of messages are list filters (`?tag=name:value`,
-- `?metadata[key]=value`), answered with JSONB containment on the message document:
-- `(doc -> 'extras' -> 'tags') @> '[{"name":"plan","value":"pro"}]'`. GIN indexes with
-- jsonb_path_ops on exactly those expressions let such a filter find its rows without
-- reading every message of the workspace; documents without tags or metadata are not in
-- them (a NULL expression is not indexed).

CREATE INDEX messages_by_tags ON messages USING GIN ((doc -> 'extras' -> 'tags') jsonb_path_ops);
CREATE INDEX messages_by_metadata ON messages USING GIN ((doc -> 'extras' -> 'metadata') jsonb_path_ops);
