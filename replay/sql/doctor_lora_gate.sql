-- Requests the waiting pass passed over in steps $from_step..$to_step because their adapter
-- would exceed max_loras: per request, its adapter and the steps held so, longest first.
SELECT
    w.request_id,
    r.lora_id,
    count(*)::INTEGER AS num_steps,
    min(w.step) AS first_step,
    max(w.step) AS last_step
FROM why_waiting w
JOIN _requests r ON r.request_id = w.request_id
WHERE w.reason = 'lora_gate' AND w.step BETWEEN $from_step AND $to_step
GROUP BY w.request_id, r.lora_id, r.request_index
ORDER BY num_steps DESC, r.request_index
