-- The first step that ended at most a span of wall time before a given step ended:
-- (step INTEGER), one row (NULL when the trace holds no wall clock, schema < 8).
-- Parameters: $1 the last step, $2 the span in nanoseconds.
SELECT min(step) AS step
FROM _steps
WHERE step <= $1
    AND ended_at_ns >= (SELECT ended_at_ns FROM _steps WHERE step = $1) - $2
