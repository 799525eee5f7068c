-- The `_requests` rows a window of steps needs: every request that arrives in it, or that
-- its first step's checkpoint names, or that any of its rows names.
-- Parameters: $1 the window's first step, $2 its last.
SELECT *
FROM _requests
WHERE request_index IN (
    SELECT request_index FROM _requests WHERE arrival_step BETWEEN $1 AND $2
    UNION ALL
    SELECT request_index FROM _checkpoint_requests WHERE step = $1
    UNION ALL
    SELECT unnest(list_concat(
        finished_req_indices, preempted_req_indices, prev_step_scheduled_req_indices
    ))
    FROM _checkpoints
    WHERE step = $1
    UNION ALL
    SELECT request_index FROM _checkpoint_batches WHERE step = $1
    UNION ALL
    SELECT request_index FROM _events WHERE step BETWEEN $1 AND $2
    UNION ALL
    SELECT request_index FROM _scheduled WHERE step BETWEEN $1 AND $2
)
ORDER BY request_index
