-- The tables stored in an attached trace file and their columns, in table order:
-- (table_name VARCHAR, column_name VARCHAR), one row per column. $1: the attached
-- database's name.
SELECT table_name, column_name
FROM duckdb_columns()
WHERE database_name = $1 AND schema_name = 'main'
ORDER BY table_name, column_index
