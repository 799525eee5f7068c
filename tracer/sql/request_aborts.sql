-- Aborts a live engine learned after the request's row was written: each row of `_batch`
-- (request_index INTEGER, abort_step INTEGER, abort_before_update BOOLEAN) sets that
-- request's abort in `_requests`. No parameters; returns nothing.
UPDATE _requests
SET abort_step = _batch.abort_step,
    abort_before_update = _batch.abort_before_update
FROM _batch
WHERE _requests.request_index = _batch.request_index
