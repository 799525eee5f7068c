-- The indices of the requests whose ids are in $1 (a VARCHAR[]): (request_id,
-- request_index), one row per id the trace holds.
SELECT request_id, request_index
FROM _requests
SEMI JOIN (SELECT unnest($1::VARCHAR[]) AS request_id) AS wanted USING (request_id)
