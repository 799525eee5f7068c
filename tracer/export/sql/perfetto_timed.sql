-- Whether the trace recorded step timings: (timed BOOLEAN), one row; false when no step has
-- any (the timeline then counts steps). No parameters.
SELECT coalesce(bool_or(schedule_ns IS NOT NULL OR model_ns IS NOT NULL), false) AS timed
FROM _steps
