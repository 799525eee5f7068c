-- Each request's sampled tokens when no step verified drafts: (step INTEGER,
-- request_index INTEGER, token_id BIGINT), one row per sampling step, in the order
-- recorded (the reader puts them by request then step: `row_order.by_request_then_step`).
-- The rows of `recorded_outputs.sql` flattened, which is cheaper to read when every step
-- samples one. The steps $1..$2.
SELECT step, request_index, sampled_token_id AS token_id
FROM _scheduled
WHERE sampled_token_id IS NOT NULL AND step BETWEEN $1 AND $2
