-- One request ($1): what it asked, when it arrived, how and when it ended.
SELECT
    request_id, arrival_step, priority, prompt_len, max_tokens, min_tokens, abort_step,
    finish_step, finish_reason, num_output_tokens, first_token_step, ttft_steps, num_preemptions
FROM requests
WHERE request_id = $1
