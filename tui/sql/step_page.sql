-- One page of the step timeline ($1..$2): budget use, counts, free blocks, why each pass stopped.
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
    blocked_request_id
FROM steps
WHERE step BETWEEN $1 AND $2
ORDER BY step
