-- Every allocate_slots call in call order: what it asked, the free blocks around it, what it got.
SELECT a.step, a.seq, r.request_id, a.pass, a.num_new_tokens, a.num_new_computed_tokens,
       a.num_lookahead_tokens, a.full_sequence_check, a.num_blocks_needed, a.watermark_blocks,
       a.num_free_blocks_before, a.num_free_blocks_after, a.granted, a.refusal, a.block_ids,
       a.request_index
FROM _allocations a
JOIN _requests r USING (request_index)
ORDER BY a.step, a.seq
