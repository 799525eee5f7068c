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
prompts AS MATERIALIZED (
    -- The prompts with a full block, of the requests ever scheduled.
    SELECT h.request_index, h.prompt_len, h.block_size, h.hashes, o.first_token_step
    FROM block_hashes h
    JOIN first_tokens o ON o.request_index = h.request_index
),
prefixes AS MATERIALIZED (
    -- Each prefix's key, its blocks' hashes summed (a sum of UBIGINTs is a HUGEINT: exact).
    SELECT request_index, first_token_step, block,
           sum(block_hash) OVER (PARTITION BY request_index ORDER BY block ROWS UNBOUNDED PRECEDING)
               AS prefix_key
    FROM (
        SELECT request_index, first_token_step,
               unnest(range(len(hashes))) AS block, unnest(hashes) AS block_hash
        FROM prompts
    ) b
),
computed AS (
    -- When each prefix held more than once was first computed: by the first token of a request
    -- holding it. A prefix held once was computed by the first token of its own prompt.
    SELECT prefix_key, min(first_token_step) AS first_step
    FROM prefixes
    GROUP BY prefix_key
    HAVING count(*) > 1
),
admissions AS (
    SELECT DISTINCT s.step, s.request_index, s.computed_before AS hit_tokens
    FROM _scheduled s
    WHERE s.kind = 'new' AND s.step BETWEEN $from_step AND $to_step
),
held AS (
    -- Per admission, the blocks of its longest prefix held more than once and computed before.
    SELECT a.step, a.request_index, max(x.block + 1) AS num_blocks
    FROM admissions a
    JOIN prefixes x ON x.request_index = a.request_index
    JOIN computed c ON c.prefix_key = x.prefix_key
    WHERE c.first_step < a.step
    GROUP BY a.step, a.request_index
),
shareable AS (
    -- A prompt whose own first token came before the admission had computed all its prefixes.
    SELECT
        a.step, a.request_index, a.hit_tokens,
        least(
            coalesce(CASE WHEN p.first_token_step < a.step THEN len(p.hashes) ELSE h.num_blocks END,
                     0) * p.block_size,
            (p.prompt_len - 1) // p.block_size * p.block_size
        ) AS cached_tokens
    FROM admissions a
    JOIN prompts p ON p.request_index = a.request_index
    LEFT JOIN held h ON h.step = a.step AND h.request_index = a.request_index
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
