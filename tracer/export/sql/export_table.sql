-- One logical table's rows, in stored order, with the trace's identity columns at the end
-- (engine VARCHAR, host VARCHAR, rank INTEGER, trace_created_at VARCHAR). $table: the table's
-- name (`_steps`, ...); $engine, $host, $rank, $created_at: the identity (NULL when unknown).
SELECT
    *,
    CAST($engine AS VARCHAR) AS engine,
    CAST($host AS VARCHAR) AS host,
    CAST($rank AS INTEGER) AS rank,
    CAST($created_at AS VARCHAR) AS trace_created_at
FROM query_table($table)
