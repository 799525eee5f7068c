-- One checkpoint's requests, in the scheduler's order (their request index), named by
-- id (NULL: an index that names no request). $1: the checkpoint's step.
SELECT r.request_id, c.* EXCLUDE (step)
FROM _checkpoint_requests c
LEFT JOIN _requests r USING (request_index)
WHERE c.step = $1
ORDER BY c.request_index
