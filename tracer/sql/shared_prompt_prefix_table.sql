-- Creates `_prompt_prefixes`: each prompt prefix that several requests of a compacted trace
-- begin with, stored once (`prefix_id`: the first such request's index). No parameters;
-- run with the compacted trace's catalog in use.
CREATE TABLE _prompt_prefixes (
    prefix_id INTEGER,
    token_ids BIGINT[]
)
