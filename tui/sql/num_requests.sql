-- The trace's requests, counted: (num_requests BIGINT). No parameters. Counted from
-- `_requests` (one row each), which DuckDB answers without the `requests` view's joins.
SELECT count(*) AS num_requests
FROM _requests
