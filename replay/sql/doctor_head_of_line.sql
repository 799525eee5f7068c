-- Waiting heads the KV cache refused in steps $from_step..$to_step while a request behind
-- them would have fit: per head, the steps it blocked admission so, the requests behind it
-- whose prompt's blocks (plus the watermark) were free when it was refused, longest first.
WITH refused AS (
    -- The waiting pass's refused call for the step's blocked head (its last, if several).
    SELECT
        a.step, a.request_index, a.num_blocks_needed, a.watermark_blocks,
        a.num_free_blocks_before
    FROM _steps s
    JOIN _allocations a
        ON a.step = s.step AND a.request_index = s.blocked_request_index
       AND a.pass = 'waiting' AND NOT a.granted
    WHERE s.admission_stop IN ('kv_full', 'kv_full_sequence')
      AND s.step BETWEEN $from_step AND $to_step
    QUALIFY row_number() OVER (PARTITION BY a.step ORDER BY a.seq DESC) = 1
),
would_fit AS (
    SELECT f.step, f.request_index AS head_index, f.num_blocks_needed, f.num_free_blocks_before,
           behind.request_index AS behind_index, behind.request_id AS behind_id
    FROM refused f
    JOIN why_waiting w ON w.step = f.step AND w.reason = 'behind_blocked_head'
    JOIN _requests behind ON behind.request_id = w.request_id
    CROSS JOIN _config c
    WHERE ceil(behind.prompt_len / c.block_size) + f.watermark_blocks <= f.num_free_blocks_before
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
