-- Each step for the Perfetto timeline, in step order: where it starts (start_ns: the recorded
-- durations of the steps before it, summed) and how long its schedule, model and update took
-- (0 when one is missing; 333, 333 and 334 when the trace has no timings at all, so 1 µs is
-- one step); the slice args (budget use, why each pass stopped) and the counters' values
-- before and after. $1, $2: the first and last step laid out (0 and past the end for the
-- whole trace); start_ns counts from the window's first step.
WITH timing AS (
    SELECT bool_or(schedule_ns IS NOT NULL OR model_ns IS NOT NULL) AS timed FROM _steps
),
durations AS (
    SELECT
        s.*,
        CASE WHEN t.timed THEN coalesce(s.schedule_ns, 0) ELSE 333 END AS schedule_d,
        CASE WHEN t.timed THEN coalesce(s.model_ns, 0) ELSE 333 END AS model_d,
        CASE WHEN t.timed THEN coalesce(s.update_ns, 0) ELSE 334 END AS update_d
    FROM steps s
    CROSS JOIN timing t
    WHERE s.step BETWEEN $1 AND $2
)
SELECT
    step,
    idle,
    CAST(coalesce(sum(schedule_d + model_d + update_d) OVER (
        ORDER BY step ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ), 0) AS BIGINT) AS start_ns,
    schedule_d AS schedule_ns,
    model_d AS model_ns,
    update_d AS update_ns,
    token_budget,
    num_scheduled_tokens,
    num_scheduled_reqs,
    num_preemptions,
    CAST(admission_stop AS VARCHAR) AS admission_stop,
    CAST(running_pass_end AS VARCHAR) AS running_pass_end,
    blocked_request_id,
    num_free_blocks_before,
    num_free_blocks_after_schedule,
    num_free_blocks_after_update,
    num_running_before,
    num_running_after,
    num_waiting_before,
    num_waiting_after
FROM durations
ORDER BY step
