-- Fills the compacted trace's `_prompt_prefixes`: for each prefix `_shared_prompts` names
-- (request_index INTEGER, prompt_prefix_id INTEGER, prompt_prefix_len INTEGER), the
-- longest part of it any request takes, from the recorded prompt of the request it is
-- named after. No parameters.
INSERT INTO compacted.main._prompt_prefixes
SELECT r.request_index, r.prompt_token_ids[:s.prompt_prefix_len]
FROM recorded.main._requests r
JOIN (
    SELECT prompt_prefix_id, max(prompt_prefix_len) AS prompt_prefix_len
    FROM _shared_prompts
    GROUP BY 1
) s ON s.prompt_prefix_id = r.request_index
ORDER BY r.request_index
