-- Creates the view `_requests` over `_request_rows`: every column of the table it replaces,
-- in order, each prompt rebuilt whole from the shared prefix it begins with. No parameters;
-- run with the compacted trace's catalog in use.
CREATE VIEW _requests AS
SELECT
    r.request_index,
    r.request_id,
    r.arrival_step,
    r.arrival_time,
    r.priority,
    r.prompt_len,
    CASE
        WHEN r.prompt_prefix_id IS NULL THEN r.prompt_suffix_token_ids
        ELSE list_concat(p.token_ids[:r.prompt_prefix_len], r.prompt_suffix_token_ids)
    END AS prompt_token_ids,
    r.max_tokens,
    r.min_tokens,
    r.eos_token_id,
    r.stop_token_ids,
    r.abort_step,
    r.abort_before_update,
    r.temperature,
    r.top_k,
    r.top_p,
    r.seed,
    r.lora_id,
    r.grammar_ready_step,
    r.draft_mismatch_every,
    r.draft_accept
FROM _request_rows r
LEFT JOIN _prompt_prefixes p ON p.prefix_id = r.prompt_prefix_id
