-- The aborted requests in the order their aborts took effect: by step, then in the order
-- the engine applied them within the step (vLLM frees the blocks of several requests
-- aborted in one call in that call's order, which a replay must follow).
SELECT r.request_id
FROM _events e
JOIN _requests r USING (request_index)
WHERE e.kind = 'abort'
ORDER BY e.step, e.seq
