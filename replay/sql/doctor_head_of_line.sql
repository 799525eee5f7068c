-- Waiting heads the KV cache refused in steps $from_step..$to_step while a request behind
-- them would have fit: per head, the steps it blocked admission so, the requests behind it
-- whose prompt's blocks (plus the watermark) were free when it was refused, longest first.
-- A request behind is one why_waiting has as `behind_blocked_head` at the step: made here from
-- the waits' steps in the window met by step number, where the view pairs every wait with
-- every step that ran.
WITH refused AS (
    -- The waiting pass's refused call for the step's blocked head (its last, if several), in
    -- the steps that ran schedule().
    SELECT
        a.step, a.request_index, a.num_blocks_needed, a.watermark_blocks,
        a.num_free_blocks_before
    FROM _steps s
    JOIN _allocations a
        ON a.step = s.step AND a.request_index = s.blocked_request_index
       AND a.pass = 'waiting' AND NOT a.granted
    WHERE s.admission_stop IN ('kv_full', 'kv_full_sequence')
      AND NOT s.idle
      AND s.step BETWEEN $from_step AND $to_step
    QUALIFY row_number() OVER (PARTITION BY a.step ORDER BY a.seq DESC) = 1
),
marks AS (
    -- An event past the window would only end a wait past it: the waits are cut there anyway.
    SELECT
        request_index, step, kind,
        lead(step) OVER (PARTITION BY request_index ORDER BY step, seq) AS next_step
    FROM _events
    WHERE kind <> 'skip' AND step <= $to_step
),
waits AS (
    -- why_waiting's waits (from arrival, or from the step after a preemption), cut to the window.
    SELECT
        request_index,
        greatest(CASE kind WHEN 'arrive' THEN step ELSE step + 1 END, $from_step) AS first_step,
        least(coalesce(next_step - 1, (SELECT max(step) FROM _steps)), $to_step) AS last_step
    FROM marks
    WHERE kind IN ('arrive', 'preempt')
),
behind AS (
    -- Each request waiting at a refused step other than its head, neither compiling its
    -- grammar nor passed over for its adapter there.
    SELECT
        f.step, f.request_index AS head_index, f.num_blocks_needed, f.watermark_blocks,
        f.num_free_blocks_before, w.request_index AS behind_index
    FROM (
        SELECT request_index, unnest(range(first_step, last_step + 1)) AS step
        FROM waits
        WHERE first_step <= last_step
    ) w
    JOIN refused f ON f.step = w.step AND f.request_index <> w.request_index
    JOIN _requests r ON r.request_index = w.request_index
    WHERE NOT coalesce(r.grammar_ready_step > f.step, false)
      AND NOT EXISTS (
          SELECT 1 FROM _events e
          WHERE e.step = f.step AND e.request_index = w.request_index
            AND e.kind = 'skip' AND e.detail = 'max_loras'
      )
),
would_fit AS (
    SELECT b.step, b.head_index, b.num_blocks_needed, b.num_free_blocks_before,
           b.behind_index, behind.request_id AS behind_id
    FROM behind b
    JOIN _requests behind ON behind.request_index = b.behind_index
    CROSS JOIN _config c
    WHERE ceil(behind.prompt_len / c.block_size) + b.watermark_blocks <= b.num_free_blocks_before
)
SELECT
    h.request_id AS head,
    count(DISTINCT w.step)::INTEGER AS num_steps,
    min(w.step) AS first_step,
    max(w.step) AS last_step,
    max(w.num_blocks_needed) AS head_blocks_needed,
    max(w.num_free_blocks_before) AS max_free_blocks,
    count(DISTINCT w.behind_index)::INTEGER AS num_behind,
    list(DISTINCT w.behind_id ORDER BY w.behind_id) AS behind
FROM would_fit w
JOIN _requests h ON h.request_index = w.head_index
GROUP BY h.request_id, w.head_index
ORDER BY num_steps DESC, w.head_index
