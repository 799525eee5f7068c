-- The latest checkpoint at or before a step: (step INTEGER), one row (NULL: none).
-- Parameters: $1 the step.
SELECT max(step) AS step FROM _checkpoints WHERE step <= $1
