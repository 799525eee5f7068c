-- Tokens the model sampled, a row per request and step, with the finish reason they caused.
SELECT o.step, r.request_id, o.token_ids, o.finish_reason, o.stop_reason, o.request_index
FROM _outputs o
JOIN _requests r USING (request_index)
ORDER BY o.step, o.request_index
