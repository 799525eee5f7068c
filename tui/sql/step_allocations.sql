-- Every allocate_slots call of one step ($1) in call order, with the free blocks around it and its result.
SELECT
    request_id,
    CAST(pass AS VARCHAR) AS pass,
    num_new_tokens,
    num_new_computed_tokens,
    num_blocks_needed,
    num_free_blocks_before,
    num_free_blocks_after,
    granted,
    refusal,
    block_ids
FROM allocations
WHERE step = $1
ORDER BY seq
