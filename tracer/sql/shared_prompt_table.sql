-- Creates `_request_rows`: `_requests` as a compacted trace stores it, each prompt as the
-- `_prompt_prefixes` row it begins with (NULL: none), the tokens of it taken, and the rest
-- of its own. No parameters; run with the compacted trace's catalog in use.
CREATE TABLE _request_rows (
    request_index INTEGER,
    request_id VARCHAR,
    arrival_step INTEGER,
    arrival_time DOUBLE,
    priority INTEGER,
    prompt_len INTEGER,
    prompt_prefix_id INTEGER,
    prompt_prefix_len INTEGER,
    prompt_suffix_token_ids BIGINT[],
    max_tokens INTEGER,
    min_tokens INTEGER,
    eos_token_id BIGINT,
    stop_token_ids BIGINT[],
    abort_step INTEGER,
    abort_before_update BOOLEAN,
    temperature DOUBLE,
    top_k INTEGER,
    top_p DOUBLE,
    seed BIGINT,
    lora_id INTEGER,
    grammar_ready_step INTEGER,
    draft_mismatch_every INTEGER,
    draft_accept INTEGER[]
)
