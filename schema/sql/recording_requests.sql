-- A recording's requests, one row each, by request_index: a request unfinished when a
-- segment opened is stored again in that segment (the same row), and an abort or a
-- grammar's readiness learned after its row was written is a row of `request_aborts` or
-- `request_grammars`, the last one its value (files are named so that their paths sort in
-- the order they were written). Reads the recording's `stored_requests`, `request_aborts`
-- and `request_grammars` (its schema's views of its files).
SELECT stored.* REPLACE (
    coalesce(aborts.abort_step, stored.abort_step) AS abort_step,
    coalesce(aborts.abort_before_update, stored.abort_before_update) AS abort_before_update,
    coalesce(grammars.grammar_ready_step, stored.grammar_ready_step) AS grammar_ready_step
)
FROM (SELECT DISTINCT ON (request_index) * FROM stored_requests ORDER BY request_index) AS stored
LEFT JOIN (
    SELECT
        request_index,
        last(abort_step ORDER BY filename, file_row_number) AS abort_step,
        last(abort_before_update ORDER BY filename, file_row_number) AS abort_before_update
    FROM request_aborts
    GROUP BY request_index
) AS aborts USING (request_index)
LEFT JOIN (
    SELECT
        request_index,
        last(grammar_ready_step ORDER BY filename, file_row_number) AS grammar_ready_step
    FROM request_grammars
    GROUP BY request_index
) AS grammars USING (request_index)
ORDER BY request_index
