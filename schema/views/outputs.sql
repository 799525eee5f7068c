-- Tokens the model sampled, a row per request and step, with the finish reason they caused.
SELECT
    s.step,
    r.request_id,
    [s.sampled_token_id] AS token_ids,
    f.detail AS finish_reason,
    f.stop_reason,
    s.request_index
FROM _scheduled s
JOIN _requests r USING (request_index)
LEFT JOIN _events f ON f.step = s.step AND f.request_index = s.request_index AND f.kind = 'finish'
WHERE s.sampled_token_id IS NOT NULL
ORDER BY s.step, s.seq
