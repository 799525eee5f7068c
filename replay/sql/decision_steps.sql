-- Steps $1..$2 in order: whether idle, free KV blocks after schedule(), and the step whose
-- update processed the step's output (NULL when idle).
SELECT step, idle, num_free_blocks_after_schedule, update_step
FROM _steps
WHERE step BETWEEN $1 AND $2
ORDER BY step
