-- The steps the trace holds, idle ones included: (num_steps BIGINT, first_step INTEGER,
-- last_step INTEGER), one row (the steps NULL when it holds none). No parameters.
SELECT count(*) AS num_steps, min(step) AS first_step, max(step) AS last_step FROM _steps
