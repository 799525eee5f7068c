-- Speculative decoding: drafts verified and accepted per request, per step and per draft position (column per), counted as vLLM's SpecDecodingStats.
-- One view, not three: the three cuts are GROUPING SETS over the same rows (one per
-- scheduled draft of a verified step), so they cannot disagree on what a draft is.
-- A draft counts once its step's output is processed. A -1 draft counts too: padding (never
-- accepted) or, under async scheduling, a placeholder for the runner's own draft
-- (num_placeholder_tokens). Accepted = tokens appended less the bonus one, before a stop cuts them.
-- acceptance_rate = num_accepted_tokens / num_draft_tokens; mean_acceptance_length =
-- 1 + num_accepted_tokens / num_drafts (per request and per step; NULL per position).
WITH verified AS (
    SELECT
        step,
        request_index,
        scheduled_draft_token_ids AS drafts,
        num_accepted
    FROM _spec_decode
    WHERE len(scheduled_draft_token_ids) > 0 AND num_accepted IS NOT NULL
),
drafts AS (
    SELECT
        step,
        request_index,
        generate_subscripts(drafts, 1) - 1 AS position,
        unnest(drafts) AS token_id,
        num_accepted
    FROM verified
),
grouped AS (
    SELECT
        CASE
            WHEN grouping(request_index) = 0 THEN 'request'
            WHEN grouping(step) = 0 THEN 'step'
            ELSE 'position'
        END AS per,
        step,
        request_index,
        position,
        count(DISTINCT (step, request_index)) AS num_drafts,
        count(*) AS num_draft_tokens,
        count(*) FILTER (position < num_accepted) AS num_accepted_tokens,
        count(*) FILTER (token_id = -1) AS num_placeholder_tokens
    FROM drafts
    GROUP BY GROUPING SETS ((request_index), (step), (position))
)
SELECT
    g.per,
    g.step,
    r.request_id,
    g.position,
    g.num_drafts,
    g.num_draft_tokens,
    g.num_accepted_tokens,
    g.num_placeholder_tokens,
    round(g.num_accepted_tokens / g.num_draft_tokens, 4) AS acceptance_rate,
    CASE
        WHEN g.per <> 'position' THEN round(1 + g.num_accepted_tokens / g.num_drafts, 4)
    END AS mean_acceptance_length
FROM grouped g
LEFT JOIN _requests r USING (request_index)
ORDER BY
    CASE g.per WHEN 'request' THEN 0 WHEN 'step' THEN 1 ELSE 2 END,
    g.request_index,
    g.step,
    g.position
