-- Why a request was still waiting at a step: a reason code and the blocked head of the queue.
-- A request whose grammar was still compiling is in `grammar_wait`; one the waiting pass passed
-- over because its adapter would exceed max_loras is in `lora_gate`; the rest wait for the reason
-- the waiting pass stopped (a skip does not end the wait).
WITH marks AS (
    SELECT
        request_index, step, kind,
        lead(step) OVER (PARTITION BY request_index ORDER BY step, seq) AS next_step
    FROM _events
    WHERE kind <> 'skip'
),
lora_skips AS (
    SELECT DISTINCT step, request_index
    FROM _events
    WHERE kind = 'skip' AND detail = 'max_loras'
),
intervals AS (
    SELECT
        request_index,
        CASE kind WHEN 'arrive' THEN step ELSE step + 1 END AS first_step,
        coalesce(next_step - 1, (SELECT max(step) FROM _steps)) AS last_step
    FROM marks
    WHERE kind IN ('arrive', 'preempt')
),
head_refusals AS (
    SELECT step, request_index, num_blocks_needed, watermark_blocks, num_free_blocks_before, refusal
    FROM _allocations
    WHERE pass = 'waiting' AND NOT granted
)
SELECT
    s.step,
    r.request_id,
    CASE
        WHEN r.grammar_ready_step > s.step THEN 'grammar_wait'
        WHEN l.request_index IS NOT NULL THEN 'lora_gate'
        WHEN s.admission_stop IN ('kv_full', 'kv_full_sequence', 'chunking_off')
            AND s.blocked_request_index = i.request_index
            THEN 'head_' || s.admission_stop
        WHEN s.admission_stop IN ('kv_full', 'kv_full_sequence', 'chunking_off')
            THEN 'behind_blocked_head'
        ELSE CAST(s.admission_stop AS VARCHAR)
    END AS reason,
    b.request_id AS blocked_head,
    CASE
        WHEN r.grammar_ready_step > s.step
            THEN format('grammar still compiling (ready at step {})', r.grammar_ready_step)
        WHEN l.request_index IS NOT NULL
            THEN format('max_loras {} reached by running adapters; lora{} is not among them',
                        (SELECT max_loras FROM _config), r.lora_id)
        ELSE CASE s.admission_stop
            WHEN 'chunking_off' THEN 'chunked prefill is off and the head''s prompt exceeds the budget left'
            WHEN 'budget' THEN format('token budget used up ({} of {})', s.num_scheduled_tokens, s.token_budget)
            WHEN 'max_num_seqs' THEN format('{} requests running, the limit', s.num_running_before)
            WHEN 'preempted_this_step' THEN 'a preemption this step stops all admission'
            WHEN 'prefill_held' THEN 'prefill held until the prefill_schedule_interval has passed'
            ELSE format('head needs {} block(s){}, {} free ({} check)',
                        h.num_blocks_needed,
                        CASE WHEN h.watermark_blocks > 0 THEN format(' + {} watermark', h.watermark_blocks) ELSE '' END,
                        h.num_free_blocks_before, h.refusal)
        END
    END AS detail,
    s.num_waiting_before,
    s.num_free_blocks_before
FROM intervals i
JOIN _steps s ON s.step BETWEEN i.first_step AND i.last_step AND NOT s.idle
JOIN _requests r ON r.request_index = i.request_index
LEFT JOIN _requests b ON b.request_index = s.blocked_request_index
LEFT JOIN head_refusals h ON h.step = s.step AND h.request_index = s.blocked_request_index
LEFT JOIN lora_skips l ON l.step = s.step AND l.request_index = i.request_index
ORDER BY r.request_index, s.step
