-- What the model said at each step a request sampled, with speculative decoding on, in
-- step order: (request_id VARCHAR, num_accepted INTEGER, proposed_draft_token_ids
-- BIGINT[]). num_accepted is NULL where no drafts were verified, proposed NULL where
-- update_draft_token_ids gave the request nothing. The steps $1..$2.
SELECT r.request_id, d.num_accepted, d.proposed_draft_token_ids
FROM _spec_decode d
JOIN _scheduled s USING (step, request_index)
JOIN _requests r USING (request_index)
WHERE s.sampled_token_id IS NOT NULL AND d.step BETWEEN $1 AND $2
ORDER BY d.step
