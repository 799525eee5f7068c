-- Per request, what a diff compares: how and when it ended, its first token, its preemptions.
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
