-- The arrivals, rejects and aborts as stored, for telling whether two traces stored the
-- same leading steps: (step, request_index, kind, detail). Of the steps $1..$2.
SELECT step, request_index, kind, detail
FROM _events
WHERE kind IN ('arrive', 'reject', 'abort') AND step BETWEEN $1 AND $2
