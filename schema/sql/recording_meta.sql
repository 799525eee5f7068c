-- A recording's meta rows, file by file: (filename VARCHAR, file_row_number BIGINT,
-- key VARCHAR, value VARCHAR), one row per fact set. $1: the meta files (a list of paths).
SELECT filename, file_row_number, key, value
FROM read_parquet($1, filename = true, file_row_number = true, hive_partitioning = false)
