-- One sweep point's run figures: steps to drain, preemptions and the computed tokens they
-- threw away (recomputed on resumption), KV usage as a fraction of the usable blocks (block 0
-- is the null block), scheduled tokens per non-idle step, and how requests ended.
-- Averages are over integer columns, so they come out the same on any number of threads.
WITH busy AS (
    SELECT
        avg(num_free_blocks_after_schedule) AS mean_free_blocks,
        min(num_free_blocks_after_schedule) AS min_free_blocks,
        avg(num_scheduled_tokens) AS tokens_per_step
    FROM _steps
    WHERE NOT idle
)
SELECT
    (SELECT count(*) FROM _steps)::INTEGER AS num_steps,
    (SELECT count(*) FROM _preemptions)::INTEGER AS num_preemptions,
    (SELECT coalesce(sum(num_computed_tokens_discarded), 0) FROM _preemptions)::BIGINT
        AS recomputed_tokens,
    (1 - busy.mean_free_blocks / (c.num_blocks - 1))::DOUBLE AS kv_usage_mean,
    (1 - busy.min_free_blocks / (c.num_blocks - 1))::DOUBLE AS kv_usage_max,
    busy.tokens_per_step::DOUBLE AS tokens_per_step,
    (SELECT count(*) FROM _events WHERE kind = 'finish')::INTEGER AS num_finished,
    (SELECT count(*) FROM _events WHERE kind = 'reject')::INTEGER AS num_rejected
FROM busy, _config c
