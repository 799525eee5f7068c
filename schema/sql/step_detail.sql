-- One step ($1) in one row: its `steps` row (NULL when the trace lacks the step), the
-- SchedulerOutput in vLLM's order (kind, tokens, computed before and after, new blocks, those of
-- every KV cache group when there are several, sampled token), every allocate_slots call in call order, and the lifecycle events (preemptions:
-- step_preemptions.sql; drafts: step_drafts.sql). Scheduled rows come from the tables, not the
-- `scheduled` view, whose per-request window spans the whole trace. Enums read as VARCHAR.
SELECT
    (SELECT t FROM (
         SELECT * REPLACE (CAST(running_pass_end AS VARCHAR) AS running_pass_end,
                           CAST(admission_stop AS VARCHAR) AS admission_stop)
         FROM steps WHERE step = $1) t) AS row,
    (SELECT list(struct_pack(
                request_id := r.request_id,
                kind := CAST(s.kind AS VARCHAR),
                num_tokens := s.num_tokens,
                computed_before := s.computed_before,
                computed_after := s.computed_before + s.num_tokens,
                new_block_ids := coalesce(b.block_ids, []),
                new_block_ids_by_group := b.by_group,
                sampled_token_id := s.sampled_token_id) ORDER BY s.seq)
     FROM _scheduled s
     JOIN _requests r USING (request_index)
     LEFT JOIN (
         -- Group 0's blocks; with hybrid KV cache groups, every group's (NULL without).
         SELECT request_index,
                flatten(list(block_ids) FILTER (WHERE kv_cache_group = 0)) AS block_ids,
                CASE WHEN max(kv_cache_group) > 0
                     THEN list(struct_pack(kv_cache_group, block_ids) ORDER BY kv_cache_group)
                END AS by_group
         FROM (
             SELECT request_index, kv_cache_group, list(block_id ORDER BY slot) AS block_ids
             FROM _block_ids
             WHERE step = $1
             GROUP BY request_index, kv_cache_group
         )
         GROUP BY request_index
     ) b USING (request_index)
     WHERE s.step = $1) AS scheduled,
    (SELECT list(struct_pack(
                request_id, pass := CAST(pass AS VARCHAR), num_new_tokens, num_new_computed_tokens,
                num_blocks_needed, num_free_blocks_before, num_free_blocks_after, granted, refusal,
                block_ids) ORDER BY seq)
     FROM allocations WHERE step = $1) AS allocations,
    (SELECT list(struct_pack(request_id, kind := CAST(kind AS VARCHAR), detail) ORDER BY seq)
     FROM events WHERE step = $1) AS events
