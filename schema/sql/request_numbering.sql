-- How `_requests` is numbered: (num_requests BIGINT, num_distinct BIGINT, first INTEGER,
-- last INTEGER), one row. A recorded trace numbers its requests 0..n-1, once each; a
-- window of one (a snapshot, a recording whose oldest segments are gone) keeps the
-- numbers of the requests it holds, once each. No parameters.
SELECT count(*) AS num_requests,
       count(DISTINCT request_index) AS num_distinct,
       min(request_index) AS first,
       max(request_index) AS last
FROM _requests
