-- Each step for the Perfetto timeline, in step order: its recorded durations (schedule_ns,
-- model_ns, update_ns; 0 when one is missing), or NULL durations when the trace has no
-- timings at all; the slice args (budget use, why each pass stopped) and the counters' values
-- before and after. No parameters.
WITH timing AS (
    SELECT bool_or(schedule_ns IS NOT NULL OR model_ns IS NOT NULL) AS timed FROM _steps
)
SELECT
    s.step,
    s.idle,
    CASE WHEN t.timed THEN coalesce(s.schedule_ns, 0) END AS schedule_ns,
    CASE WHEN t.timed THEN coalesce(s.model_ns, 0) END AS model_ns,
    CASE WHEN t.timed THEN coalesce(s.update_ns, 0) END AS update_ns,
    s.token_budget,
    s.num_scheduled_tokens,
    s.num_scheduled_reqs,
    s.num_preemptions,
    CAST(s.admission_stop AS VARCHAR) AS admission_stop,
    CAST(s.running_pass_end AS VARCHAR) AS running_pass_end,
    s.blocked_request_id,
    s.num_free_blocks_before,
    s.num_free_blocks_after_schedule,
    s.num_free_blocks_after_update,
    s.num_running_before,
    s.num_running_after,
    s.num_waiting_before,
    s.num_waiting_after
FROM steps s
CROSS JOIN timing t
ORDER BY s.step
