-- The timeline plot: steps cut into $1 buckets of the $2 steps; per bucket the mean budget use and the least free blocks.
SELECT
    CAST(floor(CAST(step AS BIGINT) * $1 / $2) AS INTEGER) AS bucket,
    avg(num_scheduled_tokens / greatest(token_budget, 1)) AS budget_use,
    min(num_free_blocks_after_schedule) AS num_free_blocks,
    max(num_preemptions) > 0 AS preempted
FROM _steps
GROUP BY bucket
ORDER BY bucket
