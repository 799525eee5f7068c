-- The blocks holding the catalog and the tables' row-group pointers: (block_id BIGINT), one
-- row per block. $1: the database (an attached trace's alias; NULL: the current one).
SELECT block_id FROM pragma_metadata_info(coalesce($1, current_database()))
