-- Every engine step: budgets, counts, free KV blocks, why each pass stopped, timings.
SELECT s.* EXCLUDE (blocked_request_index), r.request_id AS blocked_request_id
FROM _steps s
LEFT JOIN _requests r ON r.request_index = s.blocked_request_index
ORDER BY s.step
