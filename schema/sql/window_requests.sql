-- The requests a step window's rows name (`step_window`): (request_index INTEGER), one row
-- per mention. Read in the schema of a trace read through a window, its step-keyed tables
-- already cut to it. No parameters.
SELECT request_index FROM _scheduled
UNION ALL
SELECT request_index FROM _block_ids
UNION ALL
SELECT request_index FROM _allocations
UNION ALL
SELECT request_index FROM _preemptions
UNION ALL
SELECT request_index FROM _events
UNION ALL
SELECT request_index FROM _spec_decode
UNION ALL
SELECT request_index FROM _checkpoint_requests
UNION ALL
SELECT request_index FROM _checkpoint_batches
UNION ALL
SELECT blocked_request_index FROM _steps
UNION ALL
SELECT unnest(list_concat(
    finished_req_indices, preempted_req_indices, prev_step_scheduled_req_indices,
    deferred_req_indices
))
FROM _checkpoints
