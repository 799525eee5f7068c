-- Per step in $1..$2, the decision a diff compares: scheduled (request, tokens, kind) in order, preempted ids, free blocks after schedule, block ids per request, the step that processed its output; and its inputs: arrivals and aborts, sampled tokens.
WITH sched AS (
    SELECT s.step,
           list(struct_pack(request_id := r.request_id, num_tokens := s.num_tokens,
                            kind := CAST(s.kind AS VARCHAR)) ORDER BY s.seq) AS scheduled,
           list(struct_pack(request_id := r.request_id, token_id := s.sampled_token_id)
                ORDER BY s.seq) AS sampled
    FROM _scheduled s
    JOIN _requests r USING (request_index)
    WHERE s.step BETWEEN $1 AND $2
    GROUP BY s.step
),
preempted AS (
    SELECT p.step, list(DISTINCT r.request_id ORDER BY r.request_id) AS preempted
    FROM _preemptions p
    JOIN _requests r USING (request_index)
    WHERE p.step BETWEEN $1 AND $2
    GROUP BY p.step
),
blocks AS (
    SELECT step, list(struct_pack(request_id := request_id, block_ids := block_ids)
                      ORDER BY request_id) AS block_ids
    FROM (
        SELECT b.step, r.request_id, list(b.block_id ORDER BY b.slot) AS block_ids
        FROM _block_ids b
        JOIN _requests r USING (request_index)
        WHERE b.step BETWEEN $1 AND $2
        GROUP BY b.step, r.request_id
    )
    GROUP BY step
),
inputs AS (
    SELECT e.step, list(CAST(e.kind AS VARCHAR) || ' ' || r.request_id ORDER BY CAST(e.kind AS VARCHAR) || ' ' || r.request_id) AS inputs
    FROM _events e
    JOIN _requests r USING (request_index)
    WHERE e.kind IN ('arrive', 'reject', 'abort') AND e.step BETWEEN $1 AND $2
    GROUP BY e.step
)
SELECT
    st.step,
    st.idle,
    coalesce(sched.scheduled, []) AS scheduled,
    coalesce(preempted.preempted, []) AS preempted,
    CASE WHEN st.idle THEN NULL ELSE st.num_free_blocks_after_schedule END AS num_free_blocks_after_schedule,
    coalesce(inputs.inputs, []) AS inputs,
    coalesce(sched.sampled, []) AS sampled,
    coalesce(blocks.block_ids, []) AS block_ids,
    st.update_step
FROM _steps st
LEFT JOIN sched USING (step)
LEFT JOIN preempted USING (step)
LEFT JOIN blocks USING (step)
LEFT JOIN inputs USING (step)
WHERE st.step BETWEEN $1 AND $2
ORDER BY st.step
