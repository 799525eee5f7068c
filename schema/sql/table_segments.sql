-- Where each stored segment of a table lies: (column_name VARCHAR, block_id BIGINT,
-- block_offset BIGINT, extra_blocks BIGINT), one row per segment on disk. $1: the table's name.
SELECT column_name, block_id, block_offset, len(additional_block_ids) AS extra_blocks
FROM pragma_storage_info($1)
WHERE block_id >= 0
