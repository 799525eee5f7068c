-- A request whose prompt the compacted trace's view `_requests` may not rebuild exactly as
-- recorded (compared by hash: none, or the copy is not kept): (request_index INTEGER), at
-- most one row. No parameters.
SELECT request_index
FROM (SELECT request_index, hash(prompt_token_ids) AS h FROM recorded.main._requests) r
FULL JOIN (SELECT request_index, hash(prompt_token_ids) AS h FROM compacted.main._requests) c
    USING (request_index)
WHERE r.h IS DISTINCT FROM c.h
LIMIT 1
