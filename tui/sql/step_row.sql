-- One step's row of `steps` ($1), every column.
SELECT
    * EXCLUDE (running_pass_end, admission_stop),
    CAST(running_pass_end AS VARCHAR) AS running_pass_end,
    CAST(admission_stop AS VARCHAR) AS admission_stop
FROM steps
WHERE step = $1
