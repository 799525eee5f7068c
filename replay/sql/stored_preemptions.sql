-- The `_preemptions` rows as stored, the columns a step's fingerprint reads, for telling
-- whether two traces stored the same leading steps: (step, request_index). No parameters.
SELECT step, request_index
FROM _preemptions
