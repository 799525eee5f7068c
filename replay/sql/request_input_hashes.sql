-- Each request's inputs (the columns of `request_inputs.sql`) as one hash, for telling
-- whether two traces ran the same workload without reading the prompts:
-- (request_id VARCHAR, arrival_step INTEGER, inputs UBIGINT). No parameters.
SELECT
    request_id,
    arrival_step,
    hash(hash(arrival_time, priority, prompt_token_ids, max_tokens, min_tokens, eos_token_id,
              stop_token_ids, abort_step, abort_before_update, temperature, top_k, top_p),
         hash(seed, lora_id, grammar_ready_step, draft_mismatch_every, draft_accept)) AS inputs
FROM _requests
ORDER BY request_index
