-- The SchedulerOutput, a row per scheduled request in vLLM's order (running, then admissions), with the token sampled.
-- The window functions sort the scheduled rows before the block lists join them, so that the
-- lists are not carried through the sorts.
WITH numbered AS (
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
        r.prompt_len,
        s.sampled_token_id,
        s.seq,
        s.request_index
    FROM _scheduled s
    JOIN _requests r USING (request_index)
)
SELECT
    n.step,
    n.position,
    n.request_id,
    n.kind,
    n.num_tokens,
    n.computed_before,
    n.num_output_tokens,
    coalesce(b.block_ids, []) AS new_block_ids,
    n.sampled_token_id IS NULL AS is_prefill_chunk,
    n.prompt_len,
    n.sampled_token_id,
    n.seq,
    n.request_index
FROM numbered n
LEFT JOIN (
    -- KV cache group 0's blocks (a hybrid model's other groups: `_block_ids`).
    SELECT step, request_index, list(block_id ORDER BY slot) AS block_ids
    FROM _block_ids
    WHERE kv_cache_group = 0
    GROUP BY step, request_index
) b USING (step, request_index)
ORDER BY n.step, n.seq
