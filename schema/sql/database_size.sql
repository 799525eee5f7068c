-- The database's block size and the blocks in use, from its own header: (block_size BIGINT,
-- used_blocks BIGINT), one row. No parameters.
SELECT block_size, used_blocks FROM pragma_database_size()
