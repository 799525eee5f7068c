-- How long each request waited, and why: why_waiting's steps per (request, reason), first and last.
-- Before the view, the question was asked of why_waiting itself, as this query: it reads every
-- (waiting request, step) row.
SELECT
    w.request_id,
    r.request_index,
    w.reason,
    count(*) AS num_steps,
    min(w.step) AS first_step,
    max(w.step) AS last_step
FROM why_waiting w
JOIN _requests r ON r.request_id = w.request_id
GROUP BY ALL
ORDER BY r.request_index, w.reason
