-- The timeline plot: steps cut into $1 buckets; per bucket the mean budget use and the least free blocks.
SELECT
    CAST(floor(step * $1 / (SELECT count(*) FROM _steps)) AS INTEGER) AS bucket,
    avg(num_scheduled_tokens / greatest(token_budget, 1)) AS budget_use,
    min(num_free_blocks_after_schedule) AS num_free_blocks,
    max(num_preemptions) > 0 AS preempted
FROM _steps
GROUP BY bucket
ORDER BY bucket
