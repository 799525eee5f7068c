-- Evidence of head_of_line_blocking: the requests waiting behind the blocked head $head in
-- steps $from_step..$to_step, step by step, with why the head was refused.
SELECT step, request_id, blocked_head, detail
FROM why_waiting
WHERE reason = 'behind_blocked_head' AND blocked_head = $head
  AND step BETWEEN $from_step AND $to_step
ORDER BY step, request_id
