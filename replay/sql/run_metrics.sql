-- The run's figures a what-if or a diff compares: steps to drain, preemptions, throughput,
-- KV pressure, time to first token and time per output token in steps. Over the steps
-- $1..$2 (the whole run: 0 and the largest INTEGER); the latencies are of the requests
-- that arrived in them.
WITH outcomes AS (
    SELECT
        ttft_steps,
        CASE WHEN num_output_tokens > 1
            THEN (finish_step - first_token_step) / (num_output_tokens - 1) END AS tpot_steps
    FROM requests
    WHERE finish_reason IS NOT NULL AND finish_reason <> 'rejected'
        AND arrival_step BETWEEN $1 AND $2
),
steps AS (SELECT * FROM _steps WHERE step BETWEEN $1 AND $2)
SELECT
    (SELECT count(*) FROM steps) AS steps_to_drain,
    (SELECT count(*) FROM _preemptions WHERE step BETWEEN $1 AND $2) AS preemptions,
    (SELECT round(avg(num_scheduled_tokens), 2) FROM steps WHERE NOT idle) AS tokens_per_step,
    (SELECT round(avg(1 - num_free_blocks_after_schedule / (c.num_blocks - 1)), 4)
     FROM steps, _config c WHERE NOT idle) AS mean_kv_usage,
    (SELECT round(max(1 - num_free_blocks_after_schedule / (c.num_blocks - 1)), 4)
     FROM steps, _config c WHERE NOT idle) AS peak_kv_usage,
    (SELECT round(avg(ttft_steps), 2) FROM outcomes) AS mean_ttft_steps,
    (SELECT quantile_cont(ttft_steps, 0.9) FROM outcomes) AS p90_ttft_steps,
    (SELECT round(avg(tpot_steps), 3) FROM outcomes) AS mean_tpot_steps
