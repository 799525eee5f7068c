-- The ids of the requests numbered $1 (an INTEGER[]): (request_index, request_id), one row
-- per index that names a request. A window's few requests, not every one the trace holds.
SELECT request_index, request_id
FROM _requests
SEMI JOIN (SELECT unnest($1::INTEGER[]) AS request_index) AS wanted USING (request_index)
