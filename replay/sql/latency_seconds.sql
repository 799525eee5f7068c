-- Time to first token and time per output token in seconds, from a step-time model
-- (seconds = $base + $per_token * tokens + $per_request * requests) applied to every step.
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
),
latencies AS (
    SELECT
        first.ends_at - (arrived.ends_at - arrived.seconds) AS ttft_s,
        CASE WHEN r.num_output_tokens > 1
            THEN (finished.ends_at - first.ends_at) / (r.num_output_tokens - 1) END AS tpot_s
    FROM requests r
    JOIN clock arrived ON arrived.step = r.arrival_step
    JOIN clock first ON first.step = r.first_token_step
    JOIN clock finished ON finished.step = r.finish_step
)
SELECT
    (SELECT max(ends_at) FROM clock) AS total_s,
    avg(ttft_s) AS mean_ttft_s,
    quantile_cont(ttft_s, 0.9) AS p90_ttft_s,
    avg(tpot_s) AS mean_tpot_s
FROM latencies
