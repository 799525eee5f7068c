-- Creates `_request_rows`, empty: `_requests` as a compacted trace stores it, its columns
-- those of the recorded `_requests` (`tables.sql`), in order, with `prompt_token_ids` as
-- `prompt_suffix_token_ids` (the tokens after the shared prefix), then the
-- `_prompt_prefixes` row the prompt begins with (NULL: none) and the tokens of it taken.
-- No parameters; run with the compacted trace's catalog in use.
CREATE TABLE _request_rows AS
SELECT
    * RENAME (prompt_token_ids AS prompt_suffix_token_ids),
    CAST(NULL AS INTEGER) AS prompt_prefix_id,
    CAST(NULL AS INTEGER) AS prompt_prefix_len
FROM recorded.main._requests
LIMIT 0
