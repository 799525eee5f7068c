-- One checkpoint's prefill cadence (schema 9 on): (num_executed_steps, last_prefill_step,
-- prefill_capacity_bound, deferred_req_ids), NULL where the scheduler kept none. $1: the
-- checkpoint's step. An index that names no request is NULL in its list.
WITH c AS (SELECT * FROM _checkpoints WHERE step = $1),
named AS (
    SELECT DISTINCT unnest(c.deferred_req_indices) AS request_index
    FROM c
),
ids AS (
    SELECT map(list(r.request_index), list(r.request_id)) AS by_index
    FROM _requests r SEMI JOIN named USING (request_index)
)
SELECT
    c.num_executed_steps,
    c.last_prefill_step,
    c.prefill_capacity_bound,
    list_transform(c.deferred_req_indices, lambda i: ids.by_index[i])
FROM c, ids
