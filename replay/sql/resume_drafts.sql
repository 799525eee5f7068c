-- What the model runner had done for each request by a checkpoint, with speculative
-- decoding on: (request_id, num_sampled, num_verified, last_proposed, last_sample_step,
-- last_admit_step): its sampling steps before $1, of those the ones that verified drafts,
-- the drafts proposed after the last of them (NULL: none), that step, and the last step
-- that admitted or resumed it. $1: the checkpoint's step; $2: the requests' indices.
WITH rows AS (
    SELECT s.request_index, s.step, s.kind, s.sampled_token_id, d.num_accepted,
           d.proposed_draft_token_ids
    FROM _scheduled s
    LEFT JOIN _spec_decode d ON d.step = s.step AND d.request_index = s.request_index
    WHERE s.step < $1 AND list_contains($2, s.request_index)
)
SELECT
    r.request_id,
    count(*) FILTER (WHERE sampled_token_id IS NOT NULL) AS num_sampled,
    count(*) FILTER (WHERE sampled_token_id IS NOT NULL AND num_accepted IS NOT NULL) AS num_verified,
    arg_max(proposed_draft_token_ids, step) FILTER (WHERE sampled_token_id IS NOT NULL) AS last_proposed,
    max(step) FILTER (WHERE sampled_token_id IS NOT NULL) AS last_sample_step,
    max(step) FILTER (WHERE kind <> 'running') AS last_admit_step
FROM rows
JOIN _requests r USING (request_index)
GROUP BY r.request_id
