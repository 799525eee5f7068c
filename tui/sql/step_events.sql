-- Lifecycle events of one step ($1) in order: arrivals, rejections, aborts, admissions, finishes.
SELECT request_id, CAST(kind AS VARCHAR) AS kind, detail
FROM events
WHERE step = $1
ORDER BY seq
