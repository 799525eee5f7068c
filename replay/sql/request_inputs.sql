-- Each request's inputs, to tell whether two traces ran the same workload.
SELECT request_id, arrival_step, arrival_time, priority, prompt_token_ids, max_tokens,
       min_tokens, eos_token_id, stop_token_ids, abort_step,
       abort_before_update, temperature, top_k, top_p, seed
FROM _requests
ORDER BY request_index
