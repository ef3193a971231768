-- Finding messages (`GET /v1/messages?q=`): a case-insensitive substring of the subject or of
-- a recipient's address or display name. Trigram GIN indexes (pg_trgm) answer
-- `lower(text) LIKE '%part%'` by the trigrams of the part, not by reading every message.
--
-- pg_trgm is a trusted extension (PostgreSQL 13 and later): the database's owner may create
-- it without being a superuser. It goes into `public` so that dropping a Tidings schema never
-- drops it from under another; where an administrator created it already, in any schema,
-- that one is used.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE EXTENSION pg_trgm SCHEMA public;
    END IF;
END
$$;

-- Every recipient's address and display name, lower-cased, one per line (a search holds no
-- line break, so it never spans two). A message without a recipient list has its `to` only;
-- with one, `to` is its first recipient again.
CREATE FUNCTION tidings_recipient_text(doc jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT lower(concat_ws(E'\n', doc ->> 'to',
        (SELECT string_agg(concat_ws(E'\n', r ->> 'email', r ->> 'name'), E'\n')
         FROM jsonb_array_elements(coalesce(doc -> 'recipients', '[]'::jsonb)) AS r)))
$$;

-- Kept in a column the database computes at every write of `doc`: a list checks it on every
-- row it reads (a walk newest first, or the recheck of a bitmap), and calling the function
-- there cost ~10 µs a row, 250 ms for a page of a search by part of an address at a million
-- messages (bench/README.md, "Finding messages").
ALTER TABLE messages ADD COLUMN recipient_text text GENERATED ALWAYS AS (tidings_recipient_text(doc)) STORED;

DO $$
DECLARE
    ops text := (SELECT quote_ident(n.nspname) || '.gin_trgm_ops'
                 FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                 WHERE e.extname = 'pg_trgm');
BEGIN
    EXECUTE format('CREATE INDEX messages_by_subject_trgm ON messages USING GIN (lower(doc ->> ''subject'') %s)', ops);
    EXECUTE format('CREATE INDEX messages_by_recipient_trgm ON messages USING GIN (recipient_text %s)', ops);
END
$$;
