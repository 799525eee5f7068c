-- The tables of one attached trace (its catalog name, $1): what a diff's B shows under `b`.
SELECT table_name FROM duckdb_tables() WHERE database_name = $1 ORDER BY table_name
