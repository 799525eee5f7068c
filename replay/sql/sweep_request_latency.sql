-- Each ended request's time to first token and time per output token (not the rejected), in
-- steps and in seconds from a step-time model ($base + $per_token * tokens + $per_request *
-- requests per non-idle step), in request order: the values a sweep point's statistics take.
-- Only the requests that arrived in steps $from_step..$to_step (a window's point trace also
-- holds requests carried in from before it, whose first token it does not see).
WITH predicted AS (
    SELECT
        step,
        CASE WHEN idle THEN 0
             ELSE $base + $per_token * num_scheduled_tokens + $per_request * num_scheduled_reqs
        END AS seconds
    FROM _steps
),
clock AS (
    SELECT step, sum(seconds) OVER (ORDER BY step) AS ends_at, seconds FROM predicted
)
SELECT
    r.ttft_steps::DOUBLE AS ttft_steps,
    CASE WHEN r.num_output_tokens > 1
        THEN (r.finish_step - r.first_token_step) / (r.num_output_tokens - 1) END AS tpot_steps,
    first.ends_at - (arrived.ends_at - arrived.seconds) AS ttft_s,
    CASE WHEN r.num_output_tokens > 1
        THEN (finished.ends_at - first.ends_at) / (r.num_output_tokens - 1) END AS tpot_s
FROM requests r
JOIN clock arrived ON arrived.step = r.arrival_step
JOIN clock first ON first.step = r.first_token_step
JOIN clock finished ON finished.step = r.finish_step
WHERE r.finish_reason <> 'rejected' AND r.arrival_step BETWEEN $from_step AND $to_step
ORDER BY r.request_index
