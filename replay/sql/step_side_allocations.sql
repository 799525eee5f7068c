-- The allocate_slots calls of step $1 worth showing, in order: every refusal, every
-- admission, and running grants that needed new blocks.
SELECT request_id, pass, num_new_tokens, num_blocks_needed, num_free_blocks_before, granted,
       refusal
FROM allocations
WHERE step = $1 AND (NOT granted OR pass = 'waiting' OR num_blocks_needed > 0)
ORDER BY seq
