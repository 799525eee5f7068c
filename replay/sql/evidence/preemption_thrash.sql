-- Evidence of preemption_thrash: each request preempted in steps $from_step..$to_step, how
-- often, and the computed tokens its preemptions threw away, most preempted first.
SELECT request_id, count(*) AS preemptions,
       sum(num_computed_tokens_discarded) AS tokens_recomputed
FROM preemptions
WHERE step BETWEEN $from_step AND $to_step
GROUP BY request_id
ORDER BY preemptions DESC
