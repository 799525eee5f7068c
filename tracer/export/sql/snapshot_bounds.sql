-- The trace's first and last recorded steps: (first_step INTEGER, last_step INTEGER), one row
-- (NULLs when it has no step). No parameters.
SELECT min(step) AS first_step, max(step) AS last_step FROM _steps
