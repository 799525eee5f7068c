-- How long each request that arrived in steps $from_step..$to_step waited there (every
-- why_waiting step up to $to_step), and its most frequent reason, longest wait first.
WITH waits AS (
    SELECT w.request_id, w.reason, count(*)::INTEGER AS num_steps, min(w.step) AS first_step,
           max(w.step) AS last_step
    FROM why_waiting w
    JOIN _requests r ON r.request_id = w.request_id
    WHERE r.arrival_step BETWEEN $from_step AND $to_step AND w.step <= $to_step
    GROUP BY w.request_id, w.reason
)
SELECT
    r.request_id,
    coalesce(sum(w.num_steps), 0)::INTEGER AS num_waiting_steps,
    first(w.reason ORDER BY w.num_steps DESC, w.reason) AS main_reason,
    min(w.first_step) AS first_step,
    max(w.last_step) AS last_step
FROM _requests r
LEFT JOIN waits w ON w.request_id = r.request_id
WHERE r.arrival_step BETWEEN $from_step AND $to_step
GROUP BY r.request_id, r.request_index
ORDER BY num_waiting_steps DESC, r.request_index
