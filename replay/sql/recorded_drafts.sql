-- What the model said for each request each time it was scheduled, with speculative
-- decoding on, in step order: (request_id VARCHAR, num_accepted INTEGER,
-- num_sampled INTEGER, proposed_draft_token_ids BIGINT[]). num_accepted is NULL where no
-- drafts were verified, num_sampled 0 where nothing was sampled, proposed NULL where
-- update_draft_token_ids gave the request nothing. No parameters.
SELECT
    r.request_id,
    d.num_accepted,
    coalesce(len(d.sampled_token_ids), 0) AS num_sampled,
    d.proposed_draft_token_ids
FROM _spec_decode d
JOIN _scheduled s USING (step, request_index)
JOIN _requests r USING (request_index)
ORDER BY d.step, s.seq
