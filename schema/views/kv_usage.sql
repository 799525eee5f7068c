-- KV cache use over steps: blocks free and held around each schedule(), usage, pressure.
SELECT
    s.step,
    c.num_blocks - 1 AS num_usable_blocks,
    s.num_free_blocks_before,
    s.num_free_blocks_after_schedule,
    s.num_free_blocks_after_update,
    c.num_blocks - 1 - s.num_free_blocks_after_schedule AS num_used_blocks,
    round(1 - s.num_free_blocks_after_schedule / (c.num_blocks - 1), 4) AS usage,
    s.num_running_after,
    s.num_waiting_after,
    s.num_preemptions
FROM _steps s, _config c
WHERE NOT s.idle
ORDER BY s.step
