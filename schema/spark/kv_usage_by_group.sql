-- `views/kv_usage_by_group.sql` as Spark SQL: the same rows, written for Spark where no rewrite
-- of the DuckDB text reaches (a group's index comes from `posexplode`, not
-- `generate_subscripts`; Spark's arrays index from 0, and `try_element_at` gives NULL past
-- the end as DuckDB's indexing does). Keep the two in step: the Spark test compares their rows.
WITH group_specs AS (
    SELECT
        CAST(i AS INT) AS kv_cache_group,
        g.type AS attention_type,
        g.sliding_window AS sliding_window,
        g.attention_chunk_size AS attention_chunk_size
    FROM _config
    LATERAL VIEW posexplode(coalesce(kv_cache_groups, array(named_struct(
        'type', 'full',
        'sliding_window', CAST(NULL AS INT),
        'attention_chunk_size', CAST(NULL AS INT)
    )))) groups AS i, g
),
held AS (
    SELECT
        s.step,
        g.*,
        CASE
            WHEN c.kv_cache_groups IS NULL
                THEN c.num_blocks - 1 - s.num_free_blocks_after_schedule
            ELSE try_element_at(s.num_held_blocks_by_group, g.kv_cache_group + 1)
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
