-- The waiting requests the scheduler passed over at step $1, in order: request, why
-- (`WaitingSkipReason`, e.g. a grammar still compiling).
SELECT request_id, detail
FROM events
WHERE step = $1 AND kind = 'skip'
ORDER BY seq
