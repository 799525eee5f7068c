-- The database's block size and the blocks its header says the file holds, every used block
-- among them: (block_size BIGINT, total_blocks BIGINT), one row. No parameters.
SELECT block_size, total_blocks FROM pragma_database_size()
