-- The block ids in the SchedulerOutputs of steps $1..$2, each request's in table order.
SELECT step, request_index, block_id
FROM _block_ids
WHERE step BETWEEN $1 AND $2
ORDER BY step, request_index, slot
