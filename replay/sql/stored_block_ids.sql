-- The `_block_ids` rows as stored, for telling whether two traces stored the same
-- leading steps: (step, request_index, slot, block_id). No parameters.
SELECT step, request_index, slot, block_id
FROM _block_ids
