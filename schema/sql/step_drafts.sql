-- Speculative decoding in one step ($1), per request in vLLM's order: the drafts scheduled
-- (-1: padding or an async placeholder), how many were accepted (NULL: not verified), every
-- token appended, and the drafts proposed after the step.
SELECT
    r.request_id,
    d.scheduled_draft_token_ids,
    d.num_accepted,
    d.sampled_token_ids,
    d.proposed_draft_token_ids
FROM _spec_decode d
JOIN _requests r USING (request_index)
LEFT JOIN _scheduled s ON s.step = d.step AND s.request_index = d.request_index
WHERE d.step = $1
ORDER BY s.seq NULLS LAST, d.request_index
