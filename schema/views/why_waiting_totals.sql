-- How long each request waited, and why: why_waiting's steps per (request, reason), first and last.
-- A row sums why_waiting's rows of one request with one reason: `num_steps` of them, from
-- `first_step` to `last_step`. Its size grows with requests, not with steps times waiting
-- requests, and so does its cost: no wait is expanded into its steps.
-- Within a wait, a step's reason is its step's (`behind_blocked_head` for the three stops
-- that block the head, else the stop) except where why_waiting's CASE decides first: the
-- grammar prefix of the wait (`grammar_wait`), the request's LoRA-gate skips (`lora_gate`)
-- and the steps it is the blocked head (`head_<stop>`). Those exceptions cut each wait into
-- gaps; each gap's steps of each reason are counted, and found first and last, by lining the
-- gap's ends up with that reason's steps in step order (running counts, nearest steps).
WITH marks AS (
    SELECT
        request_index, step, kind,
        lead(step) OVER (PARTITION BY request_index ORDER BY step, seq) AS next_step
    FROM _events
    WHERE kind <> 'skip'
),
waits AS (
    -- Each wait (from arrival, or from the step after a preemption), as why_waiting has it.
    SELECT
        m.request_index,
        r.grammar_ready_step,
        CASE m.kind WHEN 'arrive' THEN m.step ELSE m.step + 1 END AS first_step,
        coalesce(m.next_step - 1, (SELECT max(step) FROM _steps)) AS last_step
    FROM marks m
    JOIN _requests r ON r.request_index = m.request_index
    WHERE m.kind IN ('arrive', 'preempt')
),
grammar_parts AS (
    -- The steps of a wait before its grammar is ready: all `grammar_wait`.
    SELECT request_index, first_step, least(last_step, grammar_ready_step - 1) AS last_step
    FROM waits
    WHERE grammar_ready_step > first_step AND first_step <= last_step
),
rest_parts AS (
    -- The rest of each wait: non-empty ones only, so that a request's parts are disjoint.
    SELECT request_index, first_step, last_step
    FROM (
        SELECT request_index, last_step,
               CASE WHEN grammar_ready_step > first_step THEN grammar_ready_step ELSE first_step END
                   AS first_step
        FROM waits
    ) w
    WHERE first_step <= last_step
),
step_reasons AS (
    -- Each step that ran schedule(), with the reason a waiting request that is not its blocked
    -- head and not LoRA-gated has there.
    SELECT
        step, admission_stop, blocked_request_index,
        CASE
            WHEN admission_stop IN ('kv_full', 'kv_full_sequence', 'chunking_off')
                THEN 'behind_blocked_head'
            ELSE CAST(admission_stop AS VARCHAR)
        END AS reason
    FROM _steps
    WHERE NOT idle
),
gated AS (
    SELECT DISTINCT e.step, e.request_index
    FROM _events e
    JOIN step_reasons s ON s.step = e.step
    WHERE e.kind = 'skip' AND e.detail = 'max_loras'
),
exceptions AS (
    -- The (request, step) pairs whose reason is not their step's: the gate first, then the head.
    SELECT step, request_index, 'lora_gate' AS reason FROM gated
    UNION ALL
    SELECT s.step, s.blocked_request_index, 'head_' || s.admission_stop
    FROM step_reasons s
    LEFT JOIN gated g ON g.step = s.step AND g.request_index = s.blocked_request_index
    WHERE s.admission_stop IN ('kv_full', 'kv_full_sequence', 'chunking_off')
        AND s.blocked_request_index IS NOT NULL AND g.step IS NULL
),
cuts AS (
    -- Each rest part's start and each exception, with the latest part starting at or before it.
    SELECT
        request_index, step, is_exception, reason,
        max(part_first) OVER latest AS part_first,
        max(part_last) OVER latest AS part_last
    FROM (
        SELECT request_index, first_step AS step, false AS is_exception, NULL AS reason,
               first_step AS part_first, last_step AS part_last
        FROM rest_parts
        UNION ALL
        SELECT request_index, step, true, reason, NULL, NULL
        FROM exceptions
    ) c
    WINDOW latest AS (
        PARTITION BY request_index ORDER BY step, is_exception ROWS UNBOUNDED PRECEDING
    )
),
kept_cuts AS (
    -- An exception outside every rest part is no why_waiting row (or is a grammar wait).
    SELECT * FROM cuts WHERE step <= part_last
),
gaps AS (
    -- The steps of a rest part between its exceptions, each with its step's reason.
    SELECT
        request_index,
        CASE WHEN is_exception THEN step + 1 ELSE step END AS first_step,
        coalesce(
            lead(step) OVER (PARTITION BY request_index, part_first ORDER BY step, is_exception) - 1,
            part_last
        ) AS last_step
    FROM kept_cuts
),
segments AS (
    -- The gaps, whose steps have their step's reason, and the grammar parts, whose steps are all
    -- `grammar_wait`.
    SELECT request_index, first_step, last_step, false AS is_grammar
    FROM gaps
    WHERE first_step <= last_step
    UNION ALL
    SELECT request_index, first_step, last_step, true
    FROM grammar_parts
),
lined_up AS (
    -- The steps and the segments' ends in step order, a segment's start just before its first
    -- step's row and its end just after its last one's, with running counts of steps by reason:
    -- at the start they count the steps before the segment, at the end those up to its end.
    SELECT
        request_index, segment, is_grammar, side, step, reason,
        sum(CASE WHEN side = 1 THEN 1 ELSE 0 END) OVER up_to AS num_any,
        sum(CASE WHEN side = 1 AND reason = 'no_waiting' THEN 1 ELSE 0 END) OVER up_to AS num_no_waiting,
        sum(CASE WHEN side = 1 AND reason = 'budget' THEN 1 ELSE 0 END) OVER up_to AS num_budget,
        sum(CASE WHEN side = 1 AND reason = 'max_num_seqs' THEN 1 ELSE 0 END) OVER up_to AS num_max_num_seqs,
        sum(CASE WHEN side = 1 AND reason = 'behind_blocked_head' THEN 1 ELSE 0 END) OVER up_to
            AS num_behind_blocked_head,
        sum(CASE WHEN side = 1 AND reason = 'preempted_this_step' THEN 1 ELSE 0 END) OVER up_to
            AS num_preempted_this_step,
        sum(CASE WHEN side = 1 AND reason = 'prefill_held' THEN 1 ELSE 0 END) OVER up_to
            AS num_prefill_held,
        sum(CASE WHEN side = 1 AND reason IS NULL THEN 1 ELSE 0 END) OVER up_to AS num_no_stop
    FROM (
        SELECT NULL AS request_index, NULL AS segment, NULL AS is_grammar, 1 AS side, step, reason
        FROM step_reasons
        UNION ALL
        SELECT g.request_index, g.first_step, g.is_grammar, e.side,
               CASE e.side WHEN 0 THEN g.first_step ELSE g.last_step END, NULL
        FROM segments g
        CROSS JOIN (SELECT 0 AS side UNION ALL SELECT 2) e  -- its start and its end
    ) p
    WINDOW up_to AS (ORDER BY step, side ROWS UNBOUNDED PRECEDING)
),
ranked_steps AS (
    -- Each step numbered among the steps of its reason, and among all (as `grammar_wait`).
    SELECT step, reason,
        CASE
            WHEN reason IS NULL THEN num_no_stop
            WHEN reason = 'no_waiting' THEN num_no_waiting
            WHEN reason = 'budget' THEN num_budget
            WHEN reason = 'max_num_seqs' THEN num_max_num_seqs
            WHEN reason = 'behind_blocked_head' THEN num_behind_blocked_head
            WHEN reason = 'preempted_this_step' THEN num_preempted_this_step
            WHEN reason = 'prefill_held' THEN num_prefill_held
        END AS num_steps_up_to
    FROM lined_up
    WHERE side = 1
    UNION ALL
    SELECT step, 'grammar_wait', num_any FROM lined_up
    WHERE side = 1 AND EXISTS (SELECT 1 FROM grammar_parts)
),
spans AS (
    -- Each segment's steps of each reason it may have: those up to its end less those before it.
    SELECT
        b.request_index, r.reason,
        CASE
            WHEN b.is_grammar THEN b.num_any
            WHEN r.reason IS NULL THEN b.num_no_stop
            WHEN r.reason = 'no_waiting' THEN b.num_no_waiting
            WHEN r.reason = 'budget' THEN b.num_budget
            WHEN r.reason = 'max_num_seqs' THEN b.num_max_num_seqs
            WHEN r.reason = 'behind_blocked_head' THEN b.num_behind_blocked_head
            WHEN r.reason = 'preempted_this_step' THEN b.num_preempted_this_step
            WHEN r.reason = 'prefill_held' THEN b.num_prefill_held
        END AS num_steps_before,
        CASE
            WHEN e.is_grammar THEN e.num_any
            WHEN r.reason IS NULL THEN e.num_no_stop
            WHEN r.reason = 'no_waiting' THEN e.num_no_waiting
            WHEN r.reason = 'budget' THEN e.num_budget
            WHEN r.reason = 'max_num_seqs' THEN e.num_max_num_seqs
            WHEN r.reason = 'behind_blocked_head' THEN e.num_behind_blocked_head
            WHEN r.reason = 'preempted_this_step' THEN e.num_preempted_this_step
            WHEN r.reason = 'prefill_held' THEN e.num_prefill_held
        END AS num_steps_through
    FROM lined_up b
    JOIN lined_up e
        ON e.side = 2 AND e.request_index = b.request_index AND e.segment = b.segment
        AND e.is_grammar = b.is_grammar
    JOIN (
        SELECT true AS is_grammar, 'grammar_wait' AS reason
        UNION ALL
        SELECT DISTINCT false, reason FROM step_reasons
    ) r ON r.is_grammar = b.is_grammar
    WHERE b.side = 0
),
counted AS (
    -- A span's first step is its reason's step numbered one past the steps before it.
    SELECT
        s.request_index, s.reason, s.num_steps_through - s.num_steps_before AS num_steps,
        f.step AS first_step, l.step AS last_step
    FROM spans s
    JOIN ranked_steps f
        ON f.reason IS NOT DISTINCT FROM s.reason AND f.num_steps_up_to = s.num_steps_before + 1
    JOIN ranked_steps l
        ON l.reason IS NOT DISTINCT FROM s.reason AND l.num_steps_up_to = s.num_steps_through
    WHERE s.num_steps_through > s.num_steps_before
    UNION ALL
    SELECT request_index, reason, 1, step, step
    FROM kept_cuts
    WHERE is_exception
)
SELECT
    r.request_id,
    c.request_index,
    c.reason,
    CAST(sum(c.num_steps) AS BIGINT) AS num_steps,
    min(c.first_step) AS first_step,
    max(c.last_step) AS last_step
FROM counted c
JOIN _requests r ON r.request_index = c.request_index
GROUP BY r.request_id, c.request_index, c.reason
ORDER BY c.request_index, c.reason
