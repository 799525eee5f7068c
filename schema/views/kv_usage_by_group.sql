-- KV cache use per KV cache group over steps: the blocks each group holds after each schedule().
-- Hybrid groups (sliding window or chunked local beside full attention) draw from one pool, so
-- `kv_usage`'s free blocks are every group's together; here a row per group tells a window
-- group's flat use from a full group's growth. held: distinct blocks in the group's block
-- tables (one shared through the prefix cache counts once, null entries not at all);
-- usage: held / usable blocks of the pool. With one group (every trace without
-- `kv_cache_groups`) its held blocks are the pool's used ones; a hybrid trace before schema 11
-- did not record them (NULL).
WITH group_specs AS (
    SELECT
        (i - 1)::INTEGER AS kv_cache_group,
        groups[i].type AS attention_type,
        groups[i].sliding_window AS sliding_window,
        groups[i].attention_chunk_size AS attention_chunk_size
    FROM (
        SELECT
            coalesce(kv_cache_groups, [{
                'type': 'full'::attention_type,
                'sliding_window': NULL::INTEGER,
                'attention_chunk_size': NULL::INTEGER
            }]) AS groups,
            generate_subscripts(groups, 1) AS i
        FROM _config
    )
),
held AS (
    SELECT
        s.step,
        g.*,
        CASE
            WHEN c.kv_cache_groups IS NULL
                THEN c.num_blocks - 1 - s.num_free_blocks_after_schedule
            ELSE s.num_held_blocks_by_group[g.kv_cache_group + 1]
        END AS num_held_blocks,
        c.num_blocks - 1 AS num_usable_blocks
    FROM _steps s
    CROSS JOIN _config c
    CROSS JOIN group_specs g
    WHERE NOT s.idle
)
SELECT
    step,
    kv_cache_group,
    attention_type,
    sliding_window,
    attention_chunk_size,
    num_held_blocks,
    round(num_held_blocks / num_usable_blocks, 4) AS usage
FROM held
ORDER BY step, kv_cache_group
