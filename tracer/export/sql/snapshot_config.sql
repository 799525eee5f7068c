-- The run's engine config, to copy: every knob, one row. No parameters.
SELECT * FROM _config
