-- Grammar readiness a live engine learned after the request's row was written: each row
-- of `_batch` (request_index INTEGER, grammar_ready_step INTEGER) sets that request's
-- `grammar_ready_step` in `_requests`. No parameters; returns nothing.
UPDATE _requests
SET grammar_ready_step = _batch.grammar_ready_step
FROM _batch
WHERE _requests.request_index = _batch.request_index
