-- Each request's sampled tokens in step order, the tape a replay feeds the engine:
-- (request_id VARCHAR, token_ids BIGINT[]), one row per request that sampled a token.
-- A step that verified drafts appended its accepted drafts and a bonus token
-- (`_spec_decode.sampled_token_ids`); any other step its one sampled token.
-- The steps $1..$2.
SELECT
    r.request_id,
    flatten(list(coalesce(d.sampled_token_ids, [s.sampled_token_id]) ORDER BY s.step))
        AS token_ids
FROM _scheduled s
JOIN _requests r USING (request_index)
LEFT JOIN _spec_decode d ON d.step = s.step AND d.request_index = s.request_index
WHERE s.sampled_token_id IS NOT NULL AND s.step BETWEEN $1 AND $2
GROUP BY r.request_id
