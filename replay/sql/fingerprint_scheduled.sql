-- The scheduled rows a step's fingerprint hashes, in storage order, ungrouped (grouping
-- them by step here costs more than the hashing): (step, seq, request_index, kind code,
-- num_tokens, sampled token or -1). Of the steps $1..$2.
SELECT
    step,
    seq,
    request_index,
    enum_code(kind) AS kind,
    num_tokens,
    coalesce(sampled_token_id, -1) AS sampled
FROM _scheduled
WHERE step BETWEEN $1 AND $2
