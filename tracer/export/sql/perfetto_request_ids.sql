-- The index and id of every request the window may show, one track each on the timeline: all
-- but those that arrived after its last step or finished, aborted or were rejected before its
-- first. $1, $2: the window's first and last step (0 and past the end for the whole trace).
SELECT request_index, request_id
FROM _requests
WHERE request_index NOT IN (
    SELECT request_index
    FROM _events
    GROUP BY request_index
    HAVING min(step) FILTER (WHERE kind = 'arrive') > $2
        OR max(step) FILTER (WHERE kind IN ('finish', 'abort', 'reject')) < $1
)
ORDER BY request_index
