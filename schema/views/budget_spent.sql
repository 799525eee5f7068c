-- How each step's token budget was spent: decodes, prefill chunks, recompute after preemption, drafts, unused.
-- draft_tokens are the scheduled drafts (speculative decoding, -1 padding included), counted
-- apart from the decode or prefill they ride on; draft_slots are the input slots the drafter
-- takes beyond the tokens (draft_model: one per scheduled request), spent from input_budget.
-- The scheduled rows are summed by step alone, then joined to their step's row.
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
),
spent AS (
    SELECT
        step,
        sum(CASE use WHEN 'decode' THEN num_tokens END) AS decode_tokens,
        sum(CASE use WHEN 'prefill' THEN num_tokens END) AS prefill_tokens,
        sum(CASE use WHEN 'recompute' THEN num_tokens END) AS recompute_tokens,
        sum(num_draft_tokens) AS draft_tokens,
        count(CASE use WHEN 'decode' THEN 1 END) AS num_decodes,
        count(CASE WHEN use <> 'decode' THEN 1 END) AS num_prefill_chunks
    FROM rows
    GROUP BY step
)
SELECT
    st.step,
    st.token_budget,
    st.num_scheduled_tokens,
    coalesce(sp.decode_tokens, 0) AS decode_tokens,
    coalesce(sp.prefill_tokens, 0) AS prefill_tokens,
    coalesce(sp.recompute_tokens, 0) AS recompute_tokens,
    coalesce(sp.draft_tokens, 0) AS draft_tokens,
    st.token_budget - st.num_scheduled_tokens AS unused_tokens,
    st.input_budget,
    st.num_scheduled_reqs * (c.speculative_method IS NOT DISTINCT FROM 'draft_model')::INTEGER
        AS draft_slots,
    coalesce(sp.num_decodes, 0) AS num_decodes,
    coalesce(sp.num_prefill_chunks, 0) AS num_prefill_chunks,
    st.admission_stop
FROM _steps st
CROSS JOIN _config c
LEFT JOIN spent sp USING (step)
WHERE NOT st.idle
ORDER BY st.step
