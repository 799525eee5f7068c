-- Every preemption: the victim, the request that needed room, and what it cost.
SELECT p.step, p.seq, v.request_id, n.request_id AS needed_by, p.policy,
       p.num_computed_tokens_discarded, p.num_blocks_freed, p.num_tokens_refunded,
       p.num_preemptions, p.num_free_blocks_before, p.num_free_blocks_after,
       p.request_index, p.needed_by_index
FROM _preemptions p
JOIN _requests v ON v.request_index = p.request_index
JOIN _requests n ON n.request_index = p.needed_by_index
ORDER BY p.step, p.seq
