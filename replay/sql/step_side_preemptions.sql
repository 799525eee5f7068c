-- The preemptions of step $1 in order: victim, the request that needed room, tokens lost.
SELECT request_id, needed_by, num_computed_tokens_discarded
FROM preemptions
WHERE step = $1
ORDER BY seq
