-- Per request, what a diff compares: how and when it ended, its first token, its preemptions.
-- The requests that arrived at steps $1..$2 (all: 0 and the largest INTEGER).
SELECT
    request_id,
    arrival_step,
    finish_step,
    finish_reason,
    num_output_tokens,
    first_token_step,
    ttft_steps,
    num_preemptions,
    CASE WHEN num_output_tokens > 1
        THEN (finish_step - first_token_step) / (num_output_tokens - 1) END AS tpot_steps
FROM requests
WHERE arrival_step BETWEEN $1 AND $2
