-- A request index a table names that `_requests` does not hold: (request_index INTEGER),
-- at most one row. $1: the table's name (one of the tables whose rows name a request).
SELECT request_index
FROM query_table($1)
WHERE request_index NOT IN (SELECT request_index FROM _requests)
LIMIT 1
