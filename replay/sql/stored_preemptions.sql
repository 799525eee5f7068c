-- The `_preemptions` rows as stored, the columns a step's fingerprint reads, for telling
-- whether two traces stored the same leading steps: (step, request_index). Of the steps $1..$2.
SELECT step, request_index
FROM _preemptions
WHERE step BETWEEN $1 AND $2
