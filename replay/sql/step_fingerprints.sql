-- One row per step: fingerprints of the step's decision, the tokens it sampled and its inputs.
-- Fingerprints are bit_xor of per-row hashes that include the row's position in the step,
-- so order counts; requests are named by id, so two traces of different workloads compare.
-- Each row's hash is hashed again: DuckDB's hash of several values is linear in the last
-- one, so a bit_xor of plain hash(a, b) would miss two rows swapping their b.
WITH first_seq AS (
    SELECT step, min(seq) AS seq FROM _scheduled GROUP BY step
),
scheduled AS (
    SELECT
        s.step,
        bit_xor(hash(hash(r.request_id, s.num_tokens, CAST(s.kind AS VARCHAR), s.seq - f.seq))) AS decision,
        bit_xor(hash(hash(r.request_id, coalesce(s.sampled_token_id, -1), s.seq - f.seq))) AS sampled
    FROM _scheduled s
    JOIN first_seq f USING (step)
    JOIN _requests r USING (request_index)
    GROUP BY s.step
),
first_slot AS (
    SELECT step, request_index, min(slot) AS slot FROM _block_ids GROUP BY step, request_index
),
blocks AS (
    -- Each block by its position in the step's list for the request, as the output holds
    -- it (not its slot in the table, which an earlier step decided).
    SELECT b.step, bit_xor(hash(hash(r.request_id, b.slot - f.slot, b.block_id))) AS blocks
    FROM _block_ids b
    JOIN first_slot f USING (step, request_index)
    JOIN _requests r USING (request_index)
    GROUP BY b.step
),
preempted AS (
    SELECT p.step, bit_xor(hash(r.request_id)) AS preempted
    FROM _preemptions p
    JOIN _requests r USING (request_index)
    GROUP BY p.step
),
inputs AS (
    SELECT e.step, bit_xor(hash(hash(r.request_id, CAST(e.kind AS VARCHAR), coalesce(e.detail, '')))) AS inputs
    FROM _events e
    JOIN _requests r USING (request_index)
    WHERE e.kind IN ('arrive', 'reject', 'abort')
    GROUP BY e.step
)
SELECT
    st.step,
    st.idle,
    coalesce(st.update_step, -1) AS update_step,
    coalesce(st.num_free_blocks_after_schedule, -1) AS num_free_blocks,
    coalesce(scheduled.decision, 0) AS decision,
    coalesce(scheduled.sampled, 0) AS sampled,
    coalesce(blocks.blocks, 0) AS blocks,
    coalesce(preempted.preempted, 0) AS preempted,
    coalesce(inputs.inputs, 0) AS inputs
FROM _steps st
LEFT JOIN scheduled USING (step)
LEFT JOIN blocks USING (step)
LEFT JOIN preempted USING (step)
LEFT JOIN inputs USING (step)
ORDER BY st.step
