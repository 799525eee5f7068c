-- Evidence of prefix_cache_thrash: the prefix-cache hit of every first admission in steps
-- $from_step..$to_step, against its tokens.
SELECT step, request_id, hit_tokens, num_tokens, category
FROM prefix_hits
WHERE kind = 'new' AND step BETWEEN $from_step AND $to_step
ORDER BY step
