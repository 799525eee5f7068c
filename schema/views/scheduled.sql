-- The SchedulerOutput, a row per scheduled request in vLLM's order (running, then admissions).
SELECT s.step, s.position, r.request_id, s.kind, s.num_tokens, s.computed_before,
       s.num_output_tokens, s.new_block_ids, s.is_prefill_chunk, s.request_index
FROM _scheduled s
JOIN _requests r USING (request_index)
ORDER BY s.step, s.position
