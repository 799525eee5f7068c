-- The SchedulerOutput of one step ($1) in vLLM's order: kind, tokens, computed before and after, new blocks, sampled token.
-- Reads the tables rather than the `scheduled` view, whose per-request window spans the whole trace.
SELECT
    r.request_id,
    CAST(s.kind AS VARCHAR) AS kind,
    s.num_tokens,
    s.computed_before,
    s.computed_before + s.num_tokens AS computed_after,
    coalesce(b.block_ids, []) AS new_block_ids,
    s.sampled_token_id
FROM _scheduled s
JOIN _requests r USING (request_index)
LEFT JOIN (
    SELECT request_index, list(block_id ORDER BY slot) AS block_ids
    FROM _block_ids
    WHERE step = $1
    GROUP BY request_index
) b USING (request_index)
WHERE s.step = $1
ORDER BY s.seq
