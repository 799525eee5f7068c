-- The grammar-ready steps of a recording that stored none: `request_grammars` with no rows
-- (filename VARCHAR, file_row_number BIGINT, request_index INTEGER, grammar_ready_step
-- INTEGER). No parameters.
SELECT
    CAST(NULL AS VARCHAR) AS filename,
    CAST(NULL AS BIGINT) AS file_row_number,
    CAST(NULL AS INTEGER) AS request_index,
    CAST(NULL AS INTEGER) AS grammar_ready_step
WHERE false
