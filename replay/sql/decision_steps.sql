-- Steps $1..$2 in order: whether idle, free KV blocks after schedule(), the step whose
-- update processed the step's output (NULL when idle), and how many requests it
-- scheduled (sizes the reads of the step's rows).
SELECT step, idle, num_free_blocks_after_schedule, update_step, num_scheduled_reqs
FROM _steps
WHERE step BETWEEN $1 AND $2
ORDER BY step
