-- Runs of consecutive steps in $from_step..$to_step that admitted nothing while requests
-- waited, token budget was left and blocks were free (the waiting pass stopped for a reason
-- other than the KV cache, the budget or a preemption), longest first: each run's steps,
-- the most requests waiting in it and why its waiting pass stopped, most often first.
WITH stalled AS (
    SELECT step, num_waiting_before, admission_stop,
           step - row_number() OVER (ORDER BY step) AS run
    FROM _steps
    WHERE step BETWEEN $from_step AND $to_step
      AND NOT idle
      AND num_waiting_before > 0
      AND num_new_reqs + num_resumed_reqs = 0
      AND num_scheduled_tokens < token_budget
      AND num_free_blocks_before > 0
      AND admission_stop NOT IN ('kv_full', 'kv_full_sequence', 'budget', 'preempted_this_step')
)
SELECT
    min(step) AS first_step,
    max(step) AS last_step,
    count(*)::INTEGER AS num_steps,
    max(num_waiting_before) AS max_waiting,
    list(DISTINCT CAST(admission_stop AS VARCHAR) ORDER BY CAST(admission_stop AS VARCHAR))
        AS admission_stops
FROM stalled
GROUP BY run
ORDER BY num_steps DESC, first_step
