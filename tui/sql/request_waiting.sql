-- Why one request ($1) waited, one row per run of steps with the same reason and blocked head.
WITH w AS (
    SELECT step, reason, blocked_head, detail,
           step - row_number() OVER (PARTITION BY reason, blocked_head ORDER BY step) AS run
    FROM why_waiting
    WHERE request_id = $1
)
SELECT min(step) AS first_step, max(step) AS last_step, reason, blocked_head, first(detail ORDER BY step) AS detail
FROM w
GROUP BY run, reason, blocked_head
ORDER BY first_step
