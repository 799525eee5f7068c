-- The trace's requests, counted: (num_requests BIGINT). No parameters.
SELECT count(*) AS num_requests
FROM requests
