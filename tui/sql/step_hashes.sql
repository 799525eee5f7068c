-- Per step of the whole trace, hashes of its decision, its inputs (arrivals, aborts) and its sampled tokens (see step_decisions.sql).
WITH sched AS (
    SELECT s.step,
           hash(list(struct_pack(request_id := r.request_id, num_tokens := s.num_tokens,
                                 kind := CAST(s.kind AS VARCHAR)) ORDER BY s.seq)) AS scheduled,
           hash(list(struct_pack(request_id := r.request_id, token_id := s.sampled_token_id)
                     ORDER BY s.seq)) AS sampled
    FROM _scheduled s
    JOIN _requests r USING (request_index)
    GROUP BY s.step
),
preempted AS (
    SELECT p.step, hash(list(DISTINCT r.request_id ORDER BY r.request_id)) AS preempted
    FROM _preemptions p
    JOIN _requests r USING (request_index)
    GROUP BY p.step
),
inputs AS (
    SELECT e.step, hash(list(CAST(e.kind AS VARCHAR) || ' ' || r.request_id ORDER BY CAST(e.kind AS VARCHAR) || ' ' || r.request_id)) AS inputs
    FROM _events e
    JOIN _requests r USING (request_index)
    WHERE e.kind IN ('arrive', 'reject', 'abort')
    GROUP BY e.step
)
SELECT
    st.step,
    hash(st.idle, CASE WHEN st.idle THEN NULL ELSE st.num_free_blocks_after_schedule END,
         coalesce(sched.scheduled, 0), coalesce(preempted.preempted, 0)) AS decision_hash,
    coalesce(inputs.inputs, 0) AS input_hash,
    coalesce(sched.sampled, 0) AS sampled_hash
FROM _steps st
LEFT JOIN sched USING (step)
LEFT JOIN preempted USING (step)
LEFT JOIN inputs USING (step)
ORDER BY st.step
