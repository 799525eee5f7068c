-- Fills the compacted trace's `_request_rows` from the recorded `_requests`, in request
-- order, each prompt cut after the prefix `_shared_prompts` names for it: (request_index
-- INTEGER, prompt_prefix_id INTEGER, prompt_prefix_len INTEGER), one row per request whose
-- prompt begins with a shared prefix. No parameters.
INSERT INTO compacted.main._request_rows BY NAME
SELECT
    r.* EXCLUDE (prompt_token_ids),
    s.prompt_prefix_id,
    s.prompt_prefix_len,
    r.prompt_token_ids[coalesce(s.prompt_prefix_len, 0) + 1:] AS prompt_suffix_token_ids
FROM recorded.main._requests r
LEFT JOIN _shared_prompts s USING (request_index)
ORDER BY r.request_index
