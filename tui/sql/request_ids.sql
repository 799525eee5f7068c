-- Every request id in workload order, for finding a request.
SELECT request_id FROM _requests ORDER BY request_index
