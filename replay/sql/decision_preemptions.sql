-- The victims preempted in steps $1..$2, in the order preempted.
SELECT step, request_index
FROM _preemptions
WHERE step BETWEEN $1 AND $2
ORDER BY step, seq
