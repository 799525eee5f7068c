-- Creates the view `_requests` over `_request_rows`: every column of the table it replaces,
-- in order, each prompt rebuilt whole from the shared prefix it begins with. No parameters;
-- run with the compacted trace's catalog in use.
CREATE VIEW _requests AS
SELECT * RENAME (prompt_suffix_token_ids AS prompt_token_ids)
FROM (
    SELECT r.* EXCLUDE (prompt_prefix_id, prompt_prefix_len) REPLACE (
        CASE
            WHEN r.prompt_prefix_id IS NULL THEN r.prompt_suffix_token_ids
            ELSE list_concat(p.token_ids[:r.prompt_prefix_len], r.prompt_suffix_token_ids)
        END AS prompt_suffix_token_ids
    )
    FROM _request_rows r
    LEFT JOIN _prompt_prefixes p ON p.prefix_id = r.prompt_prefix_id
)
