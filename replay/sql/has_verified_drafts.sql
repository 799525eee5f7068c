-- Whether any step verified drafts (has a `_spec_decode` row): (has_drafts BOOLEAN).
-- No parameters.
SELECT EXISTS (SELECT 1 FROM _spec_decode) AS has_drafts
