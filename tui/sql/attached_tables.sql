-- The tables of one attached trace (its catalog name, $1), and the `_` views it stores in
-- place of a table: what a diff's B shows under `b`.
SELECT table_name FROM duckdb_tables() WHERE database_name = $1
UNION ALL
SELECT view_name FROM duckdb_views() WHERE database_name = $1 AND view_name LIKE '\_%' ESCAPE '\'
ORDER BY 1
