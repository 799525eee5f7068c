-- The blocks holding the catalog and the tables' row-group pointers: (block_id BIGINT), one
-- row per block. No parameters.
SELECT block_id FROM pragma_metadata_info()
