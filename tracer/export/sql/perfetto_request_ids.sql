-- Every request's index and id, one track each on the timeline. No parameters.
SELECT request_index, request_id FROM _requests ORDER BY request_index
