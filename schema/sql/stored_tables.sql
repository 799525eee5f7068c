-- The tables stored in the trace file (not the reader's temporary views): (table_name
-- VARCHAR), one row per table. No parameters.
SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND NOT temporary
