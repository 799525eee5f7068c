-- A request's whole life, step by step: arrival, prefill chunks, decodes, preemptions, resumption, finish, blocks held.
WITH admissions AS (
    SELECT
        s.*,
        len(s.new_block_ids) AS num_new_blocks,
        sum(CASE WHEN s.kind IN ('new', 'resumed') THEN 1 ELSE 0 END)
            OVER (PARTITION BY s.request_index ORDER BY s.step) AS life
    FROM scheduled s
),
first_preemption AS (
    SELECT request_index, min(step) AS step FROM _preemptions GROUP BY request_index
),
chunks AS (
    SELECT
        a.request_index,
        a.step,
        2 AS phase,
        CASE
            WHEN a.kind = 'running' AND a.computed_before >= a.prompt_len + a.num_output_tokens - 1
                THEN 'decode'
            WHEN p.step < a.step THEN CASE a.kind WHEN 'resumed' THEN 'resume+recompute' ELSE 'recompute' END
            ELSE CASE a.kind WHEN 'new' THEN 'admit+prefill' ELSE 'prefill' END
        END AS what,
        a.num_tokens,
        a.computed_before,
        a.computed_before + a.num_tokens AS computed_after,
        sum(a.num_new_blocks) OVER (PARTITION BY a.request_index, a.life ORDER BY a.step) AS blocks_held,
        CASE WHEN a.num_new_blocks > 0 THEN format('blocks +{}', a.new_block_ids) END AS detail
    FROM admissions a
    LEFT JOIN first_preemption p USING (request_index)
),
lifecycle AS (
    SELECT request_index, step, CASE kind WHEN 'arrive' THEN 0 WHEN 'finish' THEN 4 ELSE 1 END AS phase,
           CAST(kind AS VARCHAR) AS what, NULL AS num_tokens, NULL AS computed_before,
           NULL AS computed_after, CASE WHEN kind IN ('abort', 'finish') THEN 0 END AS blocks_held, detail
    FROM _events
    WHERE kind IN ('arrive', 'reject', 'abort', 'finish')
),
preempted AS (
    SELECT p.request_index, p.step, 3 AS phase, 'preempted' AS what, NULL, NULL, 0, 0,
           format('by {}: {} computed tokens discarded, {} blocks freed{}', n.request_id,
                  p.num_computed_tokens_discarded, p.num_blocks_freed,
                  CASE WHEN p.num_tokens_refunded > 0 THEN format(', {} tokens refunded', p.num_tokens_refunded) ELSE '' END)
    FROM _preemptions p
    JOIN _requests n ON n.request_index = p.needed_by_index
),
sampled AS (
    SELECT request_index, step, 3 AS phase, 'sampled' AS what, NULL, NULL, NULL, NULL,
           CAST(sampled_token_id AS VARCHAR)
    FROM _scheduled
    WHERE sampled_token_id IS NOT NULL
)
SELECT r.request_id, t.step, t.what, t.num_tokens, t.computed_before, t.computed_after,
       t.blocks_held, t.detail, t.request_index
FROM (
    SELECT * FROM chunks
    UNION ALL SELECT * FROM lifecycle
    UNION ALL SELECT * FROM preempted
    UNION ALL SELECT * FROM sampled
) t
JOIN _requests r USING (request_index)
-- within a step: arrival, then a reject or abort, the chunk, a preemption, the token, the finish
ORDER BY t.request_index, t.step, t.phase, t.what
