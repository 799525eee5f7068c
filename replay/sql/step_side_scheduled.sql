-- The SchedulerOutput of step $1 in order: request, kind, tokens, computed tokens before,
-- new block ids and the token sampled.
SELECT request_id, kind, num_tokens, computed_before, new_block_ids, sampled_token_id
FROM scheduled
WHERE step = $1
ORDER BY position
