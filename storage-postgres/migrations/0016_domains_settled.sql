-- Background re-verification covers every domain with something left to verify: its required
-- records (not Verified), and its return path's records (issue #33) while they are not. The
-- column says "nothing left to check"; its partial index follows the rename.
ALTER TABLE domains RENAME COLUMN verified TO settled;
