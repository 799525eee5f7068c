-- Request lifecycle events in order: arrive, reject, abort, admit, resume, preempt, finish.
SELECT e.step, e.seq, r.request_id, e.kind, e.detail, e.request_index
FROM _events e
JOIN _requests r USING (request_index)
ORDER BY e.step, e.seq
