-- The scheduled rows of steps $1..$2, in the order recorded (the reader puts them by step
-- then seq, the SchedulerOutput's order: `row_order.by_step_then_seq`): request, tokens,
-- kind (its request_kind code) and the token sampled (NULL: a chunk that sampled none).
SELECT step, seq, request_index, num_tokens, enum_code(kind) AS kind, sampled_token_id
FROM _scheduled
WHERE step BETWEEN $1 AND $2
