-- The aborts of a recording that stored none: `request_aborts` with no rows
-- (filename VARCHAR, file_row_number BIGINT, request_index INTEGER, abort_step INTEGER,
-- abort_before_update BOOLEAN). No parameters.
SELECT
    CAST(NULL AS VARCHAR) AS filename,
    CAST(NULL AS BIGINT) AS file_row_number,
    CAST(NULL AS INTEGER) AS request_index,
    CAST(NULL AS INTEGER) AS abort_step,
    CAST(NULL AS BOOLEAN) AS abort_before_update
WHERE false
