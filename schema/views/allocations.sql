-- Every allocate_slots call in call order: what it asked, the free blocks around it, what it got.
-- The CTEs are inlined (NOT MATERIALIZED) so that a filter on step reaches the table scans.
WITH blocks AS NOT MATERIALIZED (
    -- Every KV cache group's new blocks, group by group (a hybrid model's slots restart at 0
    -- in each group's table).
    SELECT step, request_index, list(block_id ORDER BY kv_cache_group, slot) AS block_ids
    FROM _block_ids
    GROUP BY step, request_index
),
calls AS NOT MATERIALIZED (
    -- A running request's granted call is its _scheduled row; the rest were recorded whole.
    -- Every call asks for the drafter's lookahead slots (draft_model: k).
    SELECT s.step, s.seq, s.request_index, 'running' AS pass, s.num_tokens AS num_new_tokens,
           0 AS num_new_computed_tokens,
           (SELECT CASE speculative_method WHEN 'draft_model' THEN num_speculative_tokens ELSE 0 END
            FROM _config) AS num_lookahead_tokens,
           FALSE AS full_sequence_check,
           len(coalesce(b.block_ids, [])) AS num_blocks_needed, 0 AS watermark_blocks,
           NULL::INTEGER AS num_free_blocks_before, NULL::INTEGER AS num_free_blocks_after,
           TRUE AS granted, NULL::VARCHAR AS refusal, coalesce(b.block_ids, []) AS block_ids
    FROM _scheduled s
    LEFT JOIN blocks b USING (step, request_index)
    WHERE s.kind = 'running'
    UNION ALL
    SELECT step, seq, request_index, CAST(pass AS VARCHAR), num_new_tokens,
           num_new_computed_tokens, num_lookahead_tokens, full_sequence_check, num_blocks_needed,
           watermark_blocks, num_free_blocks_before, num_free_blocks_after, granted,
           CAST(refusal AS VARCHAR), block_ids
    FROM _allocations
),
timeline AS NOT MATERIALIZED (
    -- Known free-block counts (step start, recorded calls, preemptions) anchor the rest.
    SELECT step, seq, num_blocks_needed, num_free_blocks_after AS anchor FROM calls
    UNION ALL
    SELECT step, seq, 0, num_free_blocks_after FROM _preemptions
    UNION ALL
    SELECT step, -1, 0, num_free_blocks_before FROM _steps WHERE NOT idle
),
grouped AS NOT MATERIALIZED (
    SELECT step, seq, num_blocks_needed, anchor,
           count(anchor) OVER (PARTITION BY step ORDER BY seq) AS anchor_group
    FROM timeline
),
derived AS NOT MATERIALIZED (
    SELECT step, seq,
           first_value(anchor) OVER w
               - sum(CASE WHEN anchor IS NULL THEN num_blocks_needed ELSE 0 END) OVER w AS free_after
    FROM grouped
    WINDOW w AS (PARTITION BY step, anchor_group ORDER BY seq ROWS UNBOUNDED PRECEDING)
)
SELECT
    c.step, c.seq, r.request_id, c.pass, c.num_new_tokens, c.num_new_computed_tokens,
    c.num_lookahead_tokens, c.full_sequence_check, c.num_blocks_needed, c.watermark_blocks,
    coalesce(c.num_free_blocks_before, d.free_after + c.num_blocks_needed) AS num_free_blocks_before,
    coalesce(c.num_free_blocks_after, d.free_after) AS num_free_blocks_after,
    c.granted, c.refusal, c.block_ids, c.request_index
FROM calls c
JOIN derived d USING (step, seq)
JOIN _requests r USING (request_index)
ORDER BY c.step, c.seq
