-- Every preemption of one step ($1): the victim, who needed room, what it cost, and why.
SELECT
    request_id,
    needed_by,
    CAST(policy AS VARCHAR) AS policy,
    num_computed_tokens_discarded,
    num_blocks_freed,
    num_tokens_refunded,
    why
FROM why_preempted
WHERE step = $1
