-- First admissions in steps $from_step..$to_step that computed again a prompt prefix another
-- request had computed before (the same tokens, the same adapter), so the prefix cache had
-- held it and evicted it: per admission, the prefix's tokens it could have hit (full blocks,
-- the prompt's last token excepted, as vLLM caps a hit) and those it hit, most lost first.
-- A prefix is keyed by the sum of its blocks' hashes, each salted with its place.
WITH first_tokens AS (
    SELECT request_index, min(step) FILTER (sampled_token_id IS NOT NULL) AS first_token_step
    FROM _scheduled
    GROUP BY request_index
),
block_hashes AS (
    -- Each prompt's full blocks' hashes, in one list, so that no row carries its tokens.
    SELECT
        r.request_index, r.prompt_len, c.block_size,
        list_transform(
            range(r.prompt_len // c.block_size),
            lambda b: hash(b, r.lora_id, list_slice(r.prompt_token_ids, b * c.block_size + 1,
                                                    (b + 1) * c.block_size))
        ) AS hashes
    FROM _requests r
    CROSS JOIN _config c
    WHERE c.enable_prefix_caching AND r.prompt_len >= c.block_size
),
prompts AS (
    -- The prompts with a full block, of the requests ever scheduled.
    SELECT h.request_index, h.prompt_len, h.block_size, h.hashes, o.first_token_step
    FROM block_hashes h
    JOIN first_tokens o ON o.request_index = h.request_index
),
prefixes AS MATERIALIZED (
    -- Each prefix's key, its blocks' hashes summed (a sum of UBIGINTs is a HUGEINT: exact).
    SELECT request_index, first_token_step, block_size, prompt_len, block,
           sum(block_hash) OVER (PARTITION BY request_index ORDER BY block ROWS UNBOUNDED PRECEDING)
               AS prefix_key
    FROM (
        SELECT request_index, first_token_step, block_size, prompt_len,
               unnest(range(len(hashes))) AS block, unnest(hashes) AS block_hash
        FROM prompts
    ) b
),
computed AS (
    -- When each prefix was first computed: by the first token of a request holding it.
    SELECT prefix_key, min(first_token_step) AS first_step
    FROM prefixes
    GROUP BY prefix_key
),
admissions AS (
    SELECT s.step, s.request_index, s.computed_before AS hit_tokens
    FROM _scheduled s
    WHERE s.kind = 'new' AND s.step BETWEEN $from_step AND $to_step
),
shareable AS (
    SELECT a.step, a.request_index, a.hit_tokens,
           least(coalesce(max(x.block + 1) FILTER (c.first_step < a.step), 0) * x.block_size,
                 (x.prompt_len - 1) // x.block_size * x.block_size) AS cached_tokens
    FROM admissions a
    JOIN prefixes x ON x.request_index = a.request_index
    JOIN computed c ON c.prefix_key = x.prefix_key
    GROUP BY a.step, a.request_index, a.hit_tokens, x.block_size, x.prompt_len
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
