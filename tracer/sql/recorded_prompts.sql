-- The recorded prompts that may share a prefix, in the table's order: those whose first
-- 16 tokens hash as another prompt's do (every other prompt is stored whole and no later
-- one begins with it): (request_index INTEGER, prompt_token_ids BIGINT[]). No parameters.
WITH first_blocks AS (
    SELECT request_index, prompt_token_ids, hash(prompt_token_ids[:16]) AS first_block
    FROM recorded.main._requests
    WHERE len(prompt_token_ids) >= 16
)
SELECT request_index, prompt_token_ids
FROM first_blocks
WHERE first_block IN (SELECT first_block FROM first_blocks GROUP BY 1 HAVING count(*) > 1)
