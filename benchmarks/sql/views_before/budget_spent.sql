-- How each step's token budget was spent: decodes, prefill chunks, recompute after preemption, drafts, unused.
-- draft_tokens are the scheduled drafts (speculative decoding, -1 padding included), counted
-- apart from the decode or prefill they ride on; draft_slots are the input slots the drafter
-- takes beyond the tokens (draft_model: one per scheduled request), spent from input_budget.
WITH first_preemption AS (
    SELECT request_index, min(step) AS step FROM _preemptions GROUP BY request_index
),
rows AS (
    SELECT
        s.step,
        s.num_tokens - coalesce(len(d.scheduled_draft_token_ids), 0) AS num_tokens,
        coalesce(len(d.scheduled_draft_token_ids), 0) AS num_draft_tokens,
        CASE
            WHEN s.kind = 'running' AND s.computed_before >= s.prompt_len + s.num_output_tokens - 1
                THEN 'decode'
            WHEN p.step < s.step THEN 'recompute'
            ELSE 'prefill'
        END AS use
    FROM scheduled s
    LEFT JOIN first_preemption p USING (request_index)
    LEFT JOIN _spec_decode d ON d.step = s.step AND d.request_index = s.request_index
)
SELECT
    st.step,
    st.token_budget,
    st.num_scheduled_tokens,
    coalesce(sum(num_tokens) FILTER (use = 'decode'), 0) AS decode_tokens,
    coalesce(sum(num_tokens) FILTER (use = 'prefill'), 0) AS prefill_tokens,
    coalesce(sum(num_tokens) FILTER (use = 'recompute'), 0) AS recompute_tokens,
    coalesce(sum(num_draft_tokens), 0) AS draft_tokens,
    st.token_budget - st.num_scheduled_tokens AS unused_tokens,
    st.input_budget,
    st.num_scheduled_reqs * (c.speculative_method IS NOT DISTINCT FROM 'draft_model')::INTEGER
        AS draft_slots,
    count(*) FILTER (use = 'decode') AS num_decodes,
    count(*) FILTER (use <> 'decode') AS num_prefill_chunks,
    st.admission_stop
FROM _steps st
CROSS JOIN _config c
LEFT JOIN rows USING (step)
WHERE NOT st.idle
GROUP BY
    st.step,
    st.token_budget,
    st.num_scheduled_tokens,
    st.input_budget,
    st.num_scheduled_reqs,
    c.speculative_method,
    st.admission_stop
ORDER BY st.step
