-- One request's life ($1) from `request_timeline`, each row with the token it sampled at that step.
SELECT
    t.step,
    t.what,
    t.num_tokens,
    t.computed_before,
    t.computed_after,
    t.blocks_held,
    t.detail,
    s.detail AS sampled_token
FROM request_timeline t
LEFT JOIN (
    SELECT step, detail FROM request_timeline WHERE request_id = $1 AND what = 'sampled'
) s ON s.step = t.step AND t.num_tokens IS NOT NULL
WHERE t.request_id = $1 AND t.what <> 'sampled'
ORDER BY
    t.step,
    CASE t.what
        WHEN 'arrive' THEN 0 WHEN 'reject' THEN 1 WHEN 'abort' THEN 1
        WHEN 'preempted' THEN 3 WHEN 'finish' THEN 4 ELSE 2
    END,
    t.what
