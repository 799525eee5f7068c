-- Evidence of admission_stall: why requests waited in the stalled steps $from_step..$to_step,
-- by reason, with the steps and requests each held.
SELECT reason, count(*) AS waiting_steps, count(DISTINCT request_id) AS requests
FROM why_waiting
WHERE step BETWEEN $from_step AND $to_step
GROUP BY reason
ORDER BY waiting_steps DESC
