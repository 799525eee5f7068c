-- The steps recorded in the trace, idle ones included: (num_steps BIGINT), one row.
-- No parameters.
SELECT count(*) AS num_steps FROM _steps
