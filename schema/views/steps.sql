-- Every engine step: budgets, counts, free KV blocks, why each pass stopped, timings.
-- num_draft_tokens: drafts scheduled (speculative decoding, -1 padding included);
-- draft_slots: input slots the drafter took beyond the tokens (draft_model: one per request).
SELECT
    s.* EXCLUDE (blocked_request_index),
    r.request_id AS blocked_request_id,
    coalesce(d.num_draft_tokens, 0) AS num_draft_tokens,
    s.num_scheduled_reqs * (c.speculative_method IS NOT DISTINCT FROM 'draft_model')::INTEGER
        AS draft_slots
FROM _steps s
CROSS JOIN _config c
LEFT JOIN _requests r ON r.request_index = s.blocked_request_index
LEFT JOIN (
    SELECT step, sum(len(scheduled_draft_token_ids))::INTEGER AS num_draft_tokens
    FROM _spec_decode
    GROUP BY step
) d ON d.step = s.step
ORDER BY s.step
