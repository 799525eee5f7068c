-- Every request's slices and marks for the Perfetto timeline, in time order: step, at_update
-- (the mark sits at the step's update, not its start), type ('B' begins a slice, 'E' ends
-- one, 'I' an instant), request_index, name, num_tokens, num_steps, detail, flow_out (a flow
-- starts here), flow_in (a flow ends here). Slices: waiting, prefill, recompute, decoding (a
-- run of decodes), preempted; instants: finished, aborted, rejected, and "needs room" on the
-- request whose allocation preempted another, with a flow to the victim's preempted slice.
-- $1, $2: the first and last step laid out (0 and past the end for the whole trace): a slice
-- crossing an edge is cut there (a preempted slice cut at the start loses its
-- flow, whose start is outside), a slice or mark outside is left out.
WITH last AS (
    SELECT coalesce(max(step) + 1, 0) AS end_step FROM _steps
),
chunks AS (
    SELECT
        request_index,
        step,
        num_tokens,
        CASE
            WHEN what = 'decode' THEN 'decoding'
            WHEN what IN ('recompute', 'resume+recompute') THEN 'recompute'
            ELSE 'prefill'
        END AS state,
        sum(CASE WHEN what IN ('admit+prefill', 'resume+recompute') THEN 1 ELSE 0 END)
            OVER (PARTITION BY request_index ORDER BY step) AS life
    FROM request_timeline
    WHERE what IN ('admit+prefill', 'prefill', 'recompute', 'resume+recompute', 'decode')
),
leaves AS (
    SELECT request_index, step, kind FROM _events WHERE kind IN ('admit', 'resume', 'abort', 'reject')
),
segments AS (
    SELECT
        request_index, state AS name, min(step) AS first_step, max(step) + 1 AS end_step,
        CAST(sum(num_tokens) AS BIGINT) AS num_tokens, count(*) AS num_steps, NULL AS detail,
        NULL AS flow_in
    FROM chunks
    GROUP BY request_index, life, state, CASE WHEN state = 'decoding' THEN -1 ELSE step END
    UNION ALL
    SELECT
        e.request_index, 'waiting', e.step,
        coalesce(
            (SELECT min(l.step) FROM leaves l
             WHERE l.request_index = e.request_index AND l.kind IN ('admit', 'abort', 'reject')),
            (SELECT end_step FROM last)
        ),
        NULL, NULL, NULL, NULL
    FROM _events e
    WHERE e.kind = 'arrive'
    UNION ALL
    SELECT
        p.request_index, 'preempted', p.step,
        coalesce(
            (SELECT min(l.step) FROM leaves l
             WHERE l.request_index = p.request_index AND l.kind IN ('resume', 'abort')
               AND l.step > p.step),
            (SELECT end_step FROM last)
        ),
        NULL, NULL,
        format('by {}: {} computed tokens discarded, {} blocks freed', n.request_id,
               p.num_computed_tokens_discarded, p.num_blocks_freed),
        p.seq + 1
    FROM _preemptions p
    JOIN _requests n ON n.request_index = p.needed_by_index
),
marks AS (
    SELECT
        e.step, e.kind = 'finish' AS at_update, e.request_index,
        CASE e.kind WHEN 'finish' THEN 'finished' WHEN 'abort' THEN 'aborted' ELSE 'rejected' END
            AS name,
        e.detail, NULL AS flow_out
    FROM _events e
    WHERE e.kind IN ('finish', 'abort', 'reject')
    UNION ALL
    SELECT p.step, false, p.needed_by_index, 'needs room', 'preempted ' || v.request_id, p.seq + 1
    FROM _preemptions p
    JOIN _requests v ON v.request_index = p.request_index
),
cut AS (
    SELECT
        * EXCLUDE (first_step, end_step, flow_in),
        greatest(first_step, $1) AS first_step,
        least(end_step, $2 + 1) AS end_step,
        CASE WHEN first_step >= $1 THEN flow_in END AS flow_in
    FROM segments
    WHERE end_step > first_step AND end_step > $1 AND first_step <= $2
)
SELECT step, at_update, type, request_index, name, num_tokens, num_steps, detail, flow_out, flow_in
FROM (
    SELECT first_step AS step, false AS at_update, 'B' AS type, 2 AS tie, request_index, name,
           num_tokens, num_steps, detail, NULL AS flow_out, flow_in
    FROM cut
    UNION ALL
    SELECT end_step, false, 'E', 0, request_index, NULL, NULL, NULL, NULL, NULL, NULL
    FROM cut
    UNION ALL
    SELECT step, at_update, 'I', 1, request_index, name, NULL, NULL, detail, flow_out, NULL
    FROM marks
    WHERE step BETWEEN $1 AND $2
)
ORDER BY step, at_update, tie, request_index
