-- Every request as the workload gave it, with its recorded outputs in step order (its tape).
SELECT
    r.request_id,
    r.arrival_step,
    r.arrival_time,
    r.priority,
    r.prompt_token_ids,
    r.max_tokens,
    r.min_tokens,
    r.eos_token_id,
    r.stop_token_ids,
    r.abort_step,
    coalesce(o.output_token_ids, []) AS output_token_ids
FROM _requests r
LEFT JOIN (
    SELECT request_index, list(sampled_token_id ORDER BY step) AS output_token_ids
    FROM _scheduled
    WHERE sampled_token_id IS NOT NULL
    GROUP BY request_index
) o USING (request_index)
ORDER BY r.request_index
