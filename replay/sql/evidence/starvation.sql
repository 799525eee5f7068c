-- Evidence of starvation: how long the request $request_id waited, by reason.
SELECT reason, num_steps, first_step, last_step
FROM why_waiting_totals
WHERE request_id = $request_id
ORDER BY num_steps DESC
