-- The tables stored in the trace file (not views): (table_name VARCHAR), one row per table.
-- $1: the database (an attached trace's alias; NULL: the current one).
SELECT table_name
FROM duckdb_tables()
WHERE database_name = coalesce($1, current_database()) AND NOT temporary
ORDER BY table_name
