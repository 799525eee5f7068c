-- Per-step fingerprints of the parts of a decision that are sets, not sequences: the
-- block ids handed out, the requests preempted, the arrivals, rejects and aborts:
-- (field, step, fingerprint), one row per field and step that has any, for the steps
-- $1..$2.
-- Fingerprints are bit_xor of per-row hashes; requests are named by id, so two traces
-- of different workloads compare. Each row's hash is hashed again: DuckDB's hash of
-- several values is linear in the last one, so a bit_xor of plain hash(a, b) would miss
-- two rows swapping their b.
WITH first_slot AS (
    SELECT step, request_index, kv_cache_group, min(slot) AS slot
    FROM _block_ids
    WHERE step BETWEEN $1 AND $2
    GROUP BY step, request_index, kv_cache_group
)
-- Each block by its KV cache group and its position in the step's list for the request in
-- that group, as the output holds it (not its slot in the table, which an earlier step
-- decided).
SELECT 'blocks' AS field, b.step, bit_xor(hash(hash(r.request_id, b.kv_cache_group, b.slot - f.slot, b.block_id))) AS fingerprint
FROM _block_ids b
JOIN first_slot f USING (step, request_index, kv_cache_group)
JOIN _requests r USING (request_index)
WHERE b.step BETWEEN $1 AND $2
GROUP BY b.step
UNION ALL
SELECT 'preempted', p.step, bit_xor(hash(r.request_id))
FROM _preemptions p
JOIN _requests r USING (request_index)
WHERE p.step BETWEEN $1 AND $2
GROUP BY p.step
UNION ALL
SELECT 'inputs', e.step, bit_xor(hash(hash(r.request_id, CAST(e.kind AS VARCHAR), coalesce(e.detail, ''))))
FROM _events e
JOIN _requests r USING (request_index)
WHERE e.kind IN ('arrive', 'reject', 'abort') AND e.step BETWEEN $1 AND $2
GROUP BY e.step
