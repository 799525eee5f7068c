-- Each request's inputs, in workload order: what a replay feeds the engine, and what tells
-- whether two traces ran the same workload. One row per request: request_id VARCHAR,
-- arrival_step INTEGER, arrival_time DOUBLE, priority INTEGER, prompt_token_ids BIGINT[],
-- then its sampling params (max_tokens, min_tokens, eos_token_id, stop_token_ids,
-- temperature, top_k, top_p, seed) and its abort (abort_step, abort_before_update), as
-- `_requests` types them, then its optional features (lora_id, grammar_ready_step,
-- draft_mismatch_every, draft_accept). The requests arriving at steps $1..$3, and those
-- whose index is in $2 (all: 0, [], the largest INTEGER).
SELECT request_id, arrival_step, arrival_time, priority, prompt_token_ids, max_tokens,
       min_tokens, eos_token_id, stop_token_ids, abort_step,
       abort_before_update, temperature, top_k, top_p, seed,
       lora_id, grammar_ready_step, draft_mismatch_every, draft_accept
FROM _requests
WHERE (arrival_step >= $1 OR list_contains($2, request_index)) AND arrival_step <= $3
ORDER BY request_index
