-- The batch queued at one checkpoint, in its order, named by id (NULL: an index that
-- names no request): (request_id, num_scheduled_tokens, scheduled_draft_token_ids,
-- sampled_token_ids). $1: the checkpoint's step.
SELECT r.request_id, b.num_scheduled_tokens, b.scheduled_draft_token_ids, b.sampled_token_ids
FROM _checkpoint_batches b
LEFT JOIN _requests r USING (request_index)
WHERE b.step = $1
ORDER BY b.position
