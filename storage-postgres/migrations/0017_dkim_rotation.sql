-- DKIM key rotation (issue #34): the automatic rotation lists domains by when their active
-- keys were made (`Domain::rotation_due_from`), NULL for those it never rotates now (the
-- sandbox, domains not Verified, a rotation already pending). Domains stored before this
-- change have never rotated: their keys were made with the domain.
ALTER TABLE domains ADD COLUMN rotation_due_from timestamptz;
UPDATE domains SET rotation_due_from = COALESCE(doc->'dkim'->>'created_at', doc->>'created_at')::timestamptz
    WHERE doc->>'status' = 'Verified' AND COALESCE(doc->>'kind', 'Customer') <> 'Sandbox';
CREATE INDEX domains_to_rotate ON domains (rotation_due_from, id) WHERE rotation_due_from IS NOT NULL;
