-- The run's engine config: a column per knob, one row (none in a trace without one).
-- No parameters.
SELECT * FROM _config
