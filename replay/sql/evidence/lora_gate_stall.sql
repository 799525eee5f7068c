-- Evidence of lora_gate_stall: the requests held at the max_loras gate in steps
-- $from_step..$to_step, the steps each was held, longest first.
SELECT request_id, count(*) AS steps_gated, min(step) AS first_step
FROM why_waiting
WHERE reason = 'lora_gate' AND step BETWEEN $from_step AND $to_step
GROUP BY request_id
ORDER BY steps_gated DESC
