-- Each step's own decision columns, in storage order (the reader sorts by step when needed):
-- (step, idle, update_step, num_free_blocks), NULLs as -1. Of the steps $1..$2.
SELECT
    step,
    idle,
    coalesce(update_step, -1) AS update_step,
    coalesce(num_free_blocks_after_schedule, -1) AS num_free_blocks
FROM _steps
WHERE step BETWEEN $1 AND $2
