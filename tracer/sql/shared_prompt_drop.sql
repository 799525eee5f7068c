-- Drops the compacted trace's `_requests` table (copied empty), which `_request_rows` and
-- the view `_requests` replace. No parameters.
DROP TABLE compacted.main._requests
