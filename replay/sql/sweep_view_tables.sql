-- The names of the tables in the open file's main schema.
SELECT table_name FROM duckdb_tables()
WHERE database_name = current_database() AND schema_name = 'main'
ORDER BY table_name
