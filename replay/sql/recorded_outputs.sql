-- Each request's sampled tokens in step order, the tape a replay feeds the engine:
-- (request_id VARCHAR, token_ids BIGINT[]), one row per request that sampled a token.
-- A tape is indexed as the model counts its samples, so each step holds as many tokens
-- as the model sampled there. A step that verified drafts sampled its accepted drafts
-- and a bonus token (num_accepted + 1); `_spec_decode.sampled_token_ids` keeps those
-- the step appended, fewer where a stop cut them short and none where the request had
-- finished while the step ran (async), and the tokens not appended are the tape
-- runner's pad token 0 here (a replay stops there too and appends none of them). Any
-- other step sampled its one token. The steps $1..$2.
WITH steps AS (
    SELECT
        s.request_index,
        s.step,
        coalesce(d.sampled_token_ids, [s.sampled_token_id]) AS appended,
        coalesce(d.num_accepted + 1, 1) AS num_sampled
    FROM _scheduled s
    LEFT JOIN _spec_decode d ON d.step = s.step AND d.request_index = s.request_index
    WHERE s.sampled_token_id IS NOT NULL AND s.step BETWEEN $1 AND $2
)
SELECT
    r.request_id,
    flatten(list(
        list_resize(appended, greatest(num_sampled, len(appended)), 0) ORDER BY steps.step
    )) AS token_ids
FROM steps
JOIN _requests r USING (request_index)
GROUP BY r.request_id
