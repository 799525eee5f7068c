-- The requests that arrived in steps $from_step..$to_step and waited (why_waiting's steps up
-- to $to_step), longest wait first: the steps waited, the most frequent reason, the first and
-- last step waited; and on each row, how many requests arrived in those steps, waiting or not.
-- why_waiting's rows of those requests are made here from their waits, each wait's steps
-- listed and met by step number, where the view pairs every wait with every step that ran.
WITH marks AS (
    SELECT
        request_index, step, kind,
        lead(step) OVER (PARTITION BY request_index ORDER BY step, seq) AS next_step
    FROM _events
    WHERE kind <> 'skip'
      AND request_index IN (
          SELECT request_index FROM _requests WHERE arrival_step BETWEEN $from_step AND $to_step
      )
),
waits AS (
    -- why_waiting's waits (from arrival, or from the step after a preemption) of the
    -- window's arrivals, cut at $to_step.
    SELECT
        m.request_index,
        r.grammar_ready_step,
        CASE m.kind WHEN 'arrive' THEN m.step ELSE m.step + 1 END AS first_step,
        least(coalesce(m.next_step - 1, (SELECT max(step) FROM _steps)), $to_step) AS last_step
    FROM marks m
    JOIN _requests r ON r.request_index = m.request_index
    WHERE m.kind IN ('arrive', 'preempt') AND r.arrival_step BETWEEN $from_step AND $to_step
),
lora_skips AS (
    SELECT DISTINCT step, request_index
    FROM _events
    WHERE kind = 'skip' AND detail = 'max_loras'
),
waiting_steps AS (
    -- Each step a request waited at, that ran schedule(), with why_waiting's reason.
    SELECT
        w.request_index,
        s.step,
        CASE
            WHEN w.grammar_ready_step > s.step THEN 'grammar_wait'
            WHEN l.request_index IS NOT NULL THEN 'lora_gate'
            WHEN s.admission_stop IN ('kv_full', 'kv_full_sequence', 'chunking_off')
                AND s.blocked_request_index = w.request_index
                THEN 'head_' || s.admission_stop
            WHEN s.admission_stop IN ('kv_full', 'kv_full_sequence', 'chunking_off')
                THEN 'behind_blocked_head'
            ELSE CAST(s.admission_stop AS VARCHAR)
        END AS reason
    FROM (
        SELECT request_index, grammar_ready_step, unnest(range(first_step, last_step + 1)) AS step
        FROM waits
        WHERE first_step <= last_step
    ) w
    JOIN _steps s ON s.step = w.step AND NOT s.idle
    LEFT JOIN lora_skips l ON l.step = s.step AND l.request_index = w.request_index
),
per_reason AS (
    SELECT request_index, reason, count(*)::INTEGER AS num_steps, min(step) AS first_step,
           max(step) AS last_step
    FROM waiting_steps
    GROUP BY request_index, reason
)
SELECT
    r.request_id,
    sum(w.num_steps)::INTEGER AS num_waiting_steps,
    first(w.reason ORDER BY w.num_steps DESC, w.reason) AS main_reason,
    min(w.first_step) AS first_step,
    max(w.last_step) AS last_step,
    (SELECT count(*) FROM _requests WHERE arrival_step BETWEEN $from_step AND $to_step)::INTEGER
        AS num_requests
FROM per_reason w
JOIN _requests r ON r.request_index = w.request_index
GROUP BY r.request_id, r.request_index
ORDER BY num_waiting_steps DESC, r.request_index
