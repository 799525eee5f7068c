-- Requests the waiting pass passed over in steps $from_step..$to_step because their adapter
-- would exceed max_loras: per request, its adapter and the steps held so, longest first.
-- A step held is one why_waiting has as `lora_gate`: made here from the skips themselves, each
-- kept where it falls in one of its request's waits, at a step that ran schedule(), past the
-- request's grammar compiling.
WITH skips AS (
    SELECT DISTINCT step, request_index
    FROM _events
    WHERE kind = 'skip' AND detail = 'max_loras' AND step BETWEEN $from_step AND $to_step
),
marks AS (
    SELECT
        request_index, step, kind,
        lead(step) OVER (PARTITION BY request_index ORDER BY step, seq) AS next_step
    FROM _events
    WHERE kind <> 'skip' AND request_index IN (SELECT request_index FROM skips)
),
waits AS (
    -- why_waiting's waits (from arrival, or from the step after a preemption).
    SELECT
        request_index,
        CASE kind WHEN 'arrive' THEN step ELSE step + 1 END AS first_step,
        coalesce(next_step - 1, (SELECT max(step) FROM _steps)) AS last_step
    FROM marks
    WHERE kind IN ('arrive', 'preempt')
)
SELECT
    r.request_id,
    r.lora_id,
    count(*)::INTEGER AS num_steps,
    min(g.step) AS first_step,
    max(g.step) AS last_step
FROM skips g
JOIN waits w
    ON w.request_index = g.request_index AND g.step BETWEEN w.first_step AND w.last_step
JOIN _steps s ON s.step = g.step AND NOT s.idle
JOIN _requests r ON r.request_index = g.request_index
WHERE NOT coalesce(r.grammar_ready_step > g.step, false)
GROUP BY r.request_id, r.lora_id, r.request_index
ORDER BY num_steps DESC, r.request_index
