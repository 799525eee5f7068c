-- The trace's checkpoints: (step, num_requests, num_blocks, pending_batch_step,
-- take_ns), by step. No parameters.
SELECT step, num_requests, num_blocks, pending_batch_step, take_ns
FROM _checkpoints
ORDER BY step
