-- One checkpoint's blocks by id: (block_id, ref_cnt, free_position, block_hash,
-- cache_position). $1: the checkpoint's step.
SELECT block_id, ref_cnt, free_position, block_hash, cache_position
FROM _checkpoint_blocks
WHERE step = $1
ORDER BY block_id
