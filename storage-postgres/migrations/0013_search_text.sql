-- Finding messages, second shape (bench/README.md, "Finding messages", and docs/decisions.md):
-- one searched text per message instead of two, so that a search by part of an address many
-- messages share (one in 240) stays a page's walk at any size instead of growing with the table.
--
-- What was slow: for `q=priya.patel` the planner took the trigram bitmap, then fetched and
-- rechecked every message holding those trigrams (4,166 at a million, 41,666 at ten) to sort
-- them for a page: 46–62 ms at a million, 295 ms at ten. Walking the id index newest first
-- and checking each row finds the page after ~12,000 rows at any size. It did not choose the
-- walk because it could not see how many rows match: with the default statistics (100
-- histogram entries) no sampled address contained the term, and it guessed 150 rows. So:
--
-- * One column, `search_text`: the lower-cased subject, then every recipient's address and
--   name, one per line. A search holds no line break (core refuses one), so it still never
--   spans two texts, and `search_text LIKE '%part%'` means what the two conditions meant.
--   Stored, because a walk checks it on every row it reads: the subject taken out of the
--   document cost ~1.3 µs a row (more once a large body moves the document out of line).
-- * Its statistics 3,000 entries deep (the histogram a LIKE's share is estimated from):
--   the planner then sees a term of one in a few hundred and walks; a rare term or none
--   still gets the bitmap. At 1,000 a term of one in 240 was sometimes sampled once and
--   taken for one in a thousand (the bitmap again); 10,000 cost ~2 ms of planning per
--   search, 3,000 ~0.7 ms (measured at a million, bench/README.md). ANALYZE then samples
--   900,000 rows (~8 s at a million).
-- * One GIN trigram index on it, replacing the two of 0009 (the same trigrams: pg_trgm
--   splits words at every non-alphanumeric character, the line breaks included).
--
-- Adding the column rewrites `messages` (minutes at ten million rows, under this migration's
-- lock): run `tidings-server migrate` before rolling nodes onto the new version.
CREATE FUNCTION tidings_search_text(doc jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT lower(concat_ws(E'\n', doc ->> 'subject', doc ->> 'to',
        (SELECT string_agg(concat_ws(E'\n', r ->> 'email', r ->> 'name'), E'\n')
         FROM jsonb_array_elements(coalesce(doc -> 'recipients', '[]'::jsonb)) AS r)))
$$;

DROP INDEX messages_by_subject_trgm;
DROP INDEX messages_by_recipient_trgm;
ALTER TABLE messages DROP COLUMN recipient_text;
DROP FUNCTION tidings_recipient_text(jsonb);

ALTER TABLE messages ADD COLUMN search_text text GENERATED ALWAYS AS (tidings_search_text(doc)) STORED;
ALTER TABLE messages ALTER COLUMN search_text SET STATISTICS 3000;

DO $$
DECLARE
    ops text := (SELECT quote_ident(n.nspname) || '.gin_trgm_ops'
                 FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                 WHERE e.extname = 'pg_trgm');
BEGIN
    EXECUTE format('CREATE INDEX messages_by_search_trgm ON messages USING GIN (search_text %s)', ops);
END
$$;

-- The new column has no statistics until autovacuum analyzes the table; until then every
-- search would be planned blind.
ANALYZE messages (search_text);
