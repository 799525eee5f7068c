-- Why each request was preempted: the allocation that failed, who needed room, what it cost.
SELECT
    p.step,
    v.request_id,
    n.request_id AS needed_by,
    p.policy,
    p.request_index = p.needed_by_index AS self_preempted,
    a.num_new_tokens AS needed_tokens,
    a.num_blocks_needed AS needed_blocks,
    a.num_free_blocks_before AS free_blocks,
    v.priority AS victim_priority,
    n.priority AS needed_by_priority,
    p.num_computed_tokens_discarded,
    p.num_blocks_freed,
    p.num_tokens_refunded,
    p.num_preemptions,
    CASE
        WHEN p.request_index = p.needed_by_index THEN format(
            '{} needed {} block(s) for {} token(s) with {} free and preempted itself: '
            || 'it was the {}',
            n.request_id, a.num_blocks_needed, a.num_new_tokens, a.num_free_blocks_before,
            CASE p.policy WHEN 'fcfs' THEN 'newest running request' ELSE 'lowest-priority running request' END)
        ELSE format(
            '{} needed {} block(s) for {} token(s) with {} free; {} takes {} ({})',
            n.request_id, a.num_blocks_needed, a.num_new_tokens, a.num_free_blocks_before,
            p.policy, v.request_id,
            CASE p.policy WHEN 'fcfs' THEN 'the newest running request'
                ELSE format('priority {}, the largest value; latest arrival among ties', v.priority) END)
    END AS why
FROM _preemptions p
JOIN _requests v ON v.request_index = p.request_index
JOIN _requests n ON n.request_index = p.needed_by_index
ASOF LEFT JOIN _allocations a
    ON a.step = p.step AND a.request_index = p.needed_by_index AND a.seq <= p.seq
ORDER BY p.step, p.seq
