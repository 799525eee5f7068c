-- Steps $1..$2 as a break condition reads them (`StepCondition`'s columns, the types of
-- break_step_row.sql): each step's counts from its `steps` row (0 and NULL at an idle step,
-- as at an idle replayed step), and the ids of the requests it scheduled (in vLLM's order),
-- preempted (sorted), finished and saw arrive (in event order).
WITH ids AS (
    SELECT
        e.step,
        list(r.request_id ORDER BY e.seq) FILTER (e.kind = 'arrive') AS arrived_ids,
        list(r.request_id ORDER BY r.request_id) FILTER (e.kind = 'preempt') AS preempted_ids,
        list(r.request_id ORDER BY e.seq) FILTER (e.kind = 'finish') AS finished_ids
    FROM _events e
    JOIN _requests r USING (request_index)
    WHERE e.step BETWEEN $1 AND $2 AND e.kind IN ('arrive', 'preempt', 'finish')
    GROUP BY e.step
),
scheduled AS (
    SELECT s.step, list(r.request_id ORDER BY s.seq) AS scheduled_ids
    FROM _scheduled s
    JOIN _requests r USING (request_index)
    WHERE s.step BETWEEN $1 AND $2
    GROUP BY s.step
)
SELECT
    t.step,
    t.idle,
    coalesce(t.num_scheduled_tokens, 0)::INTEGER AS num_scheduled_tokens,
    coalesce(t.num_scheduled_reqs, 0)::INTEGER AS num_scheduled_reqs,
    coalesce(t.num_preemptions, 0)::INTEGER AS num_preemptions,
    coalesce(t.num_finished, 0)::INTEGER AS num_finished,
    t.num_free_blocks_after_schedule,
    CAST(t.running_pass_end AS VARCHAR) AS running_pass_end,
    CAST(t.admission_stop AS VARCHAR) AS admission_stop,
    coalesce(s.scheduled_ids, [])::VARCHAR[] AS scheduled_ids,
    coalesce(i.preempted_ids, [])::VARCHAR[] AS preempted_ids,
    coalesce(i.finished_ids, [])::VARCHAR[] AS finished_ids,
    coalesce(i.arrived_ids, [])::VARCHAR[] AS arrived_ids
FROM _steps t
LEFT JOIN scheduled s USING (step)
LEFT JOIN ids i USING (step)
WHERE t.step BETWEEN $1 AND $2
ORDER BY t.step
