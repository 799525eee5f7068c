-- The tables stored in the trace being compacted, attached as `recorded`: (table_name
-- VARCHAR), one row per table. No parameters.
SELECT table_name FROM duckdb_tables() WHERE database_name = 'recorded' AND NOT temporary
