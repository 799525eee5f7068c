-- One checkpoint's own row, its request sets named by id: (num_requests, num_blocks,
-- finished_req_ids, preempted_req_ids, prev_step_scheduled_req_ids,
-- pending_batch_step). $1: the checkpoint's step. An index that names no request is
-- NULL in its list. Only the requests the sets hold are looked up, not every request.
WITH c AS (SELECT * FROM _checkpoints WHERE step = $1),
named AS (
    SELECT DISTINCT unnest(
        c.finished_req_indices || c.preempted_req_indices || c.prev_step_scheduled_req_indices
    ) AS request_index
    FROM c
),
ids AS (
    SELECT map(list(r.request_index), list(r.request_id)) AS by_index
    FROM _requests r SEMI JOIN named USING (request_index)
)
SELECT
    c.num_requests,
    c.num_blocks,
    list_transform(c.finished_req_indices, lambda i: ids.by_index[i]),
    list_transform(c.preempted_req_indices, lambda i: ids.by_index[i]),
    list_transform(c.prev_step_scheduled_req_indices, lambda i: ids.by_index[i]),
    c.pending_batch_step
FROM c, ids
