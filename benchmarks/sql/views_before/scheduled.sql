-- The SchedulerOutput, a row per scheduled request in vLLM's order (running, then admissions), with the token sampled.
SELECT
    s.step,
    row_number() OVER (PARTITION BY s.step ORDER BY s.seq) - 1 AS position,
    r.request_id,
    s.kind,
    s.num_tokens,
    s.computed_before,
    coalesce(count(s.sampled_token_id) OVER (
        PARTITION BY s.request_index ORDER BY s.step ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ), 0) AS num_output_tokens,
    coalesce(b.block_ids, []) AS new_block_ids,
    s.sampled_token_id IS NULL AS is_prefill_chunk,
    r.prompt_len,
    s.sampled_token_id,
    s.seq,
    s.request_index
FROM _scheduled s
JOIN _requests r USING (request_index)
LEFT JOIN (
    -- KV cache group 0's blocks (a hybrid model's other groups: `_block_ids`).
    SELECT step, request_index, list(block_id ORDER BY slot) AS block_ids
    FROM _block_ids
    WHERE kv_cache_group = 0
    GROUP BY step, request_index
) b USING (step, request_index)
ORDER BY s.step, s.seq
