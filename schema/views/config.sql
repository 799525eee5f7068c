-- The engine config of the run, one row with every knob.
SELECT * FROM _config
