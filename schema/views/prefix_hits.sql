-- Prefix-cache hits at each admission: real reuse of a shared prefix versus a preempted request re-finding its own blocks.
SELECT
    s.step,
    s.request_id,
    s.kind,
    s.computed_before AS hit_tokens,
    s.prompt_len + s.num_output_tokens AS num_tokens,
    s.prompt_len + s.num_output_tokens - s.computed_before AS tokens_to_compute,
    round(s.computed_before / (s.prompt_len + s.num_output_tokens), 4) AS hit_ratio,
    CASE
        WHEN s.computed_before = 0 THEN 'miss'
        WHEN s.kind = 'resumed' THEN 'recompute_after_preemption'
        ELSE 'shared_prefix'
    END AS category
FROM scheduled s
WHERE s.kind IN ('new', 'resumed')
ORDER BY s.step, s.seq
