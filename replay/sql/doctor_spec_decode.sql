-- Speculative decoding in steps $from_step..$to_step: drafts verified and accepted (as
-- spec_acceptance counts them), the steps they ran in, and the requests with the most
-- drafts rejected, worst first.
WITH verified AS (
    SELECT step, request_index, len(scheduled_draft_token_ids) AS num_drafts, num_accepted
    FROM _spec_decode
    WHERE len(scheduled_draft_token_ids) > 0 AND num_accepted IS NOT NULL
      AND step BETWEEN $from_step AND $to_step
),
per_request AS (
    SELECT request_index, sum(num_drafts - num_accepted)::BIGINT AS num_rejected
    FROM verified
    GROUP BY request_index
)
SELECT
    (SELECT coalesce(sum(num_drafts), 0) FROM verified)::BIGINT AS num_draft_tokens,
    (SELECT coalesce(sum(num_accepted), 0) FROM verified)::BIGINT AS num_accepted_tokens,
    (SELECT min(step) FROM verified) AS first_step,
    (SELECT max(step) FROM verified) AS last_step,
    (SELECT coalesce(list(r.request_id ORDER BY p.num_rejected DESC, p.request_index), [])
     FROM per_request p JOIN _requests r ON r.request_index = p.request_index) AS worst_requests
