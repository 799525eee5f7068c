-- First admissions in steps $from_step..$to_step that computed again a prompt prefix another
-- request had computed before (the same tokens, the same adapter), so the prefix cache had
-- held it and evicted it: per admission, the prefix's tokens it could have hit (full blocks,
-- the prompt's last token excepted, as vLLM caps a hit) and those it hit, most lost first.
-- A prefix is keyed by the sum of its blocks' hashes, each salted with its place.
WITH prompts AS (
    SELECT r.request_index, r.request_id, r.lora_id, r.prompt_len, r.prompt_token_ids,
           o.first_token_step, c.block_size
    FROM _requests r
    CROSS JOIN _config c
    JOIN (
        SELECT request_index, min(step) FILTER (sampled_token_id IS NOT NULL) AS first_token_step
        FROM _scheduled
        GROUP BY request_index
    ) o ON o.request_index = r.request_index
    WHERE c.enable_prefix_caching
),
blocks AS (
    SELECT p.request_index, b.block,
           hash(b.block, p.lora_id, list_slice(p.prompt_token_ids, b.block * p.block_size + 1,
                                               (b.block + 1) * p.block_size))::HUGEINT AS block_hash
    FROM prompts p, LATERAL (SELECT unnest(range(p.prompt_len // p.block_size)) AS block) b
),
prefixes AS (
    SELECT request_index, block,
           sum(block_hash) OVER (PARTITION BY request_index ORDER BY block) AS prefix_key
    FROM blocks
),
computed AS (
    -- When each prefix was first computed: by the first token of a request holding it.
    SELECT x.prefix_key, min(p.first_token_step) AS first_step
    FROM prefixes x
    JOIN prompts p ON p.request_index = x.request_index
    GROUP BY x.prefix_key
),
admissions AS (
    SELECT s.step, s.request_index, s.computed_before AS hit_tokens
    FROM _scheduled s
    WHERE s.kind = 'new' AND s.step BETWEEN $from_step AND $to_step
),
shareable AS (
    SELECT a.step, a.request_index, a.hit_tokens,
           least(coalesce(max(x.block + 1) FILTER (c.first_step < a.step), 0) * p.block_size,
                 (p.prompt_len - 1) // p.block_size * p.block_size) AS cached_tokens
    FROM admissions a
    JOIN prompts p ON p.request_index = a.request_index
    JOIN prefixes x ON x.request_index = a.request_index
    JOIN computed c ON c.prefix_key = x.prefix_key
    GROUP BY a.step, a.request_index, a.hit_tokens, p.block_size, p.prompt_len
)
SELECT
    s.step,
    r.request_id,
    s.cached_tokens,
    s.hit_tokens,
    (s.cached_tokens - s.hit_tokens)::INTEGER AS tokens_recomputed
FROM shareable s
JOIN _requests r ON r.request_index = s.request_index
WHERE s.cached_tokens > 0
ORDER BY tokens_recomputed DESC, s.step, s.request_index
