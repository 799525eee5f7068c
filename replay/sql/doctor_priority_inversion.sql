-- Waiting heads the KV cache refused in steps $from_step..$to_step while requests of lower
-- priority (a larger value) ran: per head, its priority, the steps it was held so, and the
-- lower-priority requests running then, longest first.
WITH blocked AS (
    SELECT step, blocked_request_index AS head_index
    FROM _steps
    WHERE admission_stop IN ('kv_full', 'kv_full_sequence')
      AND step BETWEEN $from_step AND $to_step
),
holders AS (
    SELECT b.step, b.head_index, r.request_index AS holder_index, r.request_id AS holder_id
    FROM blocked b
    JOIN _requests h ON h.request_index = b.head_index
    JOIN _scheduled s ON s.step = b.step
    JOIN _requests r ON r.request_index = s.request_index
    WHERE r.priority > h.priority
)
SELECT
    h.request_id AS head,
    h.priority,
    count(DISTINCT x.step)::INTEGER AS num_steps,
    min(x.step) AS first_step,
    max(x.step) AS last_step,
    count(DISTINCT x.holder_index)::INTEGER AS num_holders,
    list(DISTINCT x.holder_id ORDER BY x.holder_id) AS holders
FROM holders x
JOIN _requests h ON h.request_index = x.head_index
GROUP BY h.request_id, h.priority, x.head_index
ORDER BY num_steps DESC, x.head_index
