-- How each step's token budget was spent: decodes, prefill chunks, recompute after preemption, unused.
WITH first_preemption AS (
    SELECT request_index, min(step) AS step FROM _preemptions GROUP BY request_index
),
rows AS (
    SELECT
        s.step,
        s.num_tokens,
        CASE
            WHEN s.kind = 'running' AND s.computed_before >= s.prompt_len + s.num_output_tokens - 1
                THEN 'decode'
            WHEN p.step < s.step THEN 'recompute'
            ELSE 'prefill'
        END AS use
    FROM scheduled s
    LEFT JOIN first_preemption p USING (request_index)
)
SELECT
    st.step,
    st.token_budget,
    st.num_scheduled_tokens,
    coalesce(sum(num_tokens) FILTER (use = 'decode'), 0) AS decode_tokens,
    coalesce(sum(num_tokens) FILTER (use = 'prefill'), 0) AS prefill_tokens,
    coalesce(sum(num_tokens) FILTER (use = 'recompute'), 0) AS recompute_tokens,
    st.token_budget - st.num_scheduled_tokens AS unused_tokens,
    count(*) FILTER (use = 'decode') AS num_decodes,
    count(*) FILTER (use <> 'decode') AS num_prefill_chunks,
    st.admission_stop
FROM _steps st
LEFT JOIN rows USING (step)
WHERE NOT st.idle
GROUP BY st.step, st.token_budget, st.num_scheduled_tokens, st.admission_stop
ORDER BY st.step
