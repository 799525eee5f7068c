-- Each request's sampled tokens when no step verified drafts: (request_index INTEGER,
-- token_id BIGINT), one row per sampling step, by request then step (the rows of
-- `recorded_outputs.sql` flattened, which is cheaper to read when every step samples one).
-- No parameters.
SELECT request_index, sampled_token_id AS token_id
FROM _scheduled
WHERE sampled_token_id IS NOT NULL
ORDER BY request_index, step
