-- One page of the step timeline ($1..$2): budget use, counts, free blocks, why each pass stopped;
-- a step the trace does not hold (a recording's gap, or before its first step) is a row whose
-- `recorded` is false. Read from `_steps`, not the `steps` view: the page's few blocked heads
-- are looked up alone (the LIMIT tells the planner the page is small), so a page costs the same
-- in any trace length.
WITH page AS (
    SELECT * FROM _steps WHERE step BETWEEN $1 AND $2 LIMIT $2 - $1 + 1
),
blocked AS (
    SELECT request_index, request_id
    FROM _requests
    WHERE request_index IN (SELECT blocked_request_index FROM page)
),
held AS (
    SELECT
        step,
        idle,
        token_budget,
        num_scheduled_tokens,
        num_scheduled_reqs,
        num_running_after,
        num_waiting_after,
        num_preemptions,
        num_finished,
        num_free_blocks_after_schedule,
        CAST(running_pass_end AS VARCHAR) AS running_pass_end,
        CAST(admission_stop AS VARCHAR) AS admission_stop,
        r.request_id AS blocked_request_id
    FROM page s
    LEFT JOIN blocked r ON r.request_index = s.blocked_request_index
)
SELECT
    CAST(steps.range AS INTEGER) AS step,
    held.step IS NOT NULL AS recorded,
    held.* EXCLUDE (step)
FROM range(CAST($1 AS BIGINT), CAST($2 AS BIGINT) + 1) AS steps
LEFT JOIN held ON held.step = steps.range
ORDER BY step
