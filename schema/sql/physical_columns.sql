-- The trace file's own tables and their columns (not the reader's TEMP views):
-- (database_name VARCHAR, table_name VARCHAR, column_name VARCHAR), one row per column.
-- No parameters.
SELECT database_name, table_name, column_name
FROM duckdb_columns()
WHERE schema_name = 'main' AND database_name = current_database()
ORDER BY table_name, column_index
