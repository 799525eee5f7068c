-- Each request's sampled tokens in step order, the tape a replay feeds the engine:
-- (request_id VARCHAR, token_ids BIGINT[]), one row per request that sampled a token.
-- No parameters.
SELECT r.request_id, list(s.sampled_token_id ORDER BY s.step) AS token_ids
FROM _scheduled s
JOIN _requests r USING (request_index)
WHERE s.sampled_token_id IS NOT NULL
GROUP BY r.request_id
