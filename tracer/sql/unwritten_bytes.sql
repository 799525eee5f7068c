-- Bytes of rows DuckDB holds in memory and has not written to the file yet (committed
-- since the last checkpoint), as one BIGINT. No parameters.
SELECT coalesce(sum(memory_usage_bytes), 0)::BIGINT
FROM duckdb_memory()
WHERE tag = 'IN_MEMORY_TABLE'
