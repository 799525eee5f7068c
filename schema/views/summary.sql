-- The whole run in one row: steps, requests by outcome, preemptions, tokens, KV pressure, step time.
SELECT
    (SELECT count(*) FROM _steps) AS num_steps,
    (SELECT count(*) FROM _steps WHERE idle) AS num_idle_steps,
    (SELECT count(*) FROM _requests) AS num_requests,
    (SELECT count(*) FROM _events WHERE kind = 'finish') AS num_finished,
    (SELECT count(*) FROM _events WHERE kind = 'abort') AS num_aborted,
    (SELECT count(*) FROM _events WHERE kind = 'reject') AS num_rejected,
    (SELECT count(*) FROM _preemptions) AS num_preemptions,
    (SELECT count(DISTINCT request_index) FROM _preemptions) AS num_preempted_requests,
    (SELECT coalesce(sum(num_scheduled_tokens), 0) FROM _steps) AS num_scheduled_tokens,
    (SELECT count(sampled_token_id) FROM _scheduled) AS num_sampled_tokens,
    (SELECT round(avg(num_scheduled_tokens), 1) FROM _steps WHERE NOT idle) AS mean_tokens_per_step,
    (SELECT min(num_free_blocks_after_schedule) FROM _steps WHERE NOT idle) AS min_free_blocks,
    (SELECT round(avg(schedule_ns) / 1e3, 1) FROM _steps WHERE NOT idle) AS mean_schedule_us,
    (SELECT round(avg(model_ns) / 1e3, 1) FROM _steps WHERE NOT idle) AS mean_model_us,
    (SELECT map_from_entries(list((reason, n) ORDER BY reason))
     FROM (
         SELECT CASE kind WHEN 'finish' THEN detail ELSE CAST(kind AS VARCHAR) END AS reason,
                count(*) AS n
         FROM _events
         WHERE kind IN ('finish', 'abort', 'reject')
         GROUP BY ALL
     )) AS finish_reasons
