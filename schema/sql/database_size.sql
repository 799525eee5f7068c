-- The database's block size, from its own header: (block_size BIGINT), one row.
-- No parameters.
SELECT block_size FROM pragma_database_size()
