-- Every request's id by its index (the key the step tables use).
SELECT request_index, request_id
FROM _requests
ORDER BY request_index
