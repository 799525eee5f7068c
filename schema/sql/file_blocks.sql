-- The database's block size and the blocks its header says the file holds, every used block
-- among them: (block_size BIGINT, total_blocks BIGINT), one row. $1: the database (an
-- attached trace's alias; NULL: the current one).
SELECT block_size, total_blocks
FROM pragma_database_size()
WHERE database_name = coalesce($1, current_database())
