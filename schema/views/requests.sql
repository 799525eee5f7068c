-- Every request: what it asked, when it arrived, how and when it ended.
SELECT
    r.request_id,
    r.request_index,
    r.arrival_step,
    r.arrival_time,
    r.priority,
    r.prompt_len,
    r.max_tokens,
    r.min_tokens,
    r.eos_token_id,
    r.stop_token_ids,
    r.abort_step,
    r.abort_before_update,
    f.step AS finish_step,
    f.reason AS finish_reason,
    f.stop_reason,
    coalesce(o.num_output_tokens, 0) AS num_output_tokens,
    o.first_token_step,
    o.first_token_step - r.arrival_step AS ttft_steps,
    coalesce(p.num_preemptions, 0) AS num_preemptions,
    r.prompt_token_ids
FROM _requests r
LEFT JOIN (
    SELECT request_index, step, stop_reason,
           CASE kind WHEN 'finish' THEN detail ELSE CAST(kind AS VARCHAR) END AS reason
    FROM _events
    WHERE kind IN ('finish', 'abort', 'reject')
) f USING (request_index)
LEFT JOIN (
    SELECT
        request_index,
        count(sampled_token_id) AS num_output_tokens,
        min(step) FILTER (sampled_token_id IS NOT NULL) AS first_token_step
    FROM _scheduled
    GROUP BY request_index
) o USING (request_index)
LEFT JOIN (
    SELECT request_index, count(*) AS num_preemptions FROM _preemptions GROUP BY request_index
) p USING (request_index)
ORDER BY r.request_index
