-- The scheduled rows of steps $1..$2 in the SchedulerOutput's order: request, tokens,
-- kind (its request_kind code) and the token sampled (NULL: a chunk that sampled none).
SELECT step, request_index, num_tokens, enum_code(kind) AS kind, sampled_token_id
FROM _scheduled
WHERE step BETWEEN $1 AND $2
ORDER BY step, seq
