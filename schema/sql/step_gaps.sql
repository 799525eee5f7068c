-- The runs of steps a trace does not hold between two it does: (first_step INTEGER,
-- last_step INTEGER), one row per run, by step. No parameters.
SELECT step + 1 AS first_step, next_step - 1 AS last_step
FROM (SELECT step, lead(step) OVER (ORDER BY step) AS next_step FROM _steps)
WHERE next_step > step + 1
ORDER BY step
