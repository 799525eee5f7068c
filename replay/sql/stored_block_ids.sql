-- The `_block_ids` rows as stored, for telling whether two traces stored the same
-- leading steps: (step, request_index, slot, block_id, kv_cache_group). Of the steps $1..$2.
SELECT step, request_index, slot, block_id, kv_cache_group
FROM _block_ids
WHERE step BETWEEN $1 AND $2
