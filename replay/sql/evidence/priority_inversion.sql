-- Evidence of priority_inversion: why the head $request_id waited in steps
-- $from_step..$to_step, step by step.
SELECT step, request_id, reason, detail
FROM why_waiting
WHERE request_id = $request_id AND step BETWEEN $from_step AND $to_step
ORDER BY step
