-- Two traces' per-step hashes (relations a and b, from step_hashes.sql) aligned by step number:
-- every step where the decision, the inputs or the sampled tokens differ, or that only one side has.
SELECT
    coalesce(a.step, b.step) AS step,
    a.step IS NULL OR b.step IS NULL AS missing,
    a.step IS NULL OR b.step IS NULL OR a.decision_hash <> b.decision_hash AS decision_differs,
    coalesce(a.input_hash <> b.input_hash, FALSE) AS inputs_differ,
    coalesce(a.sampled_hash <> b.sampled_hash, FALSE) AS sampled_differ
FROM a
FULL OUTER JOIN b ON a.step = b.step
WHERE a.step IS NULL
   OR b.step IS NULL
   OR a.decision_hash <> b.decision_hash
   OR a.input_hash <> b.input_hash
   OR a.sampled_hash <> b.sampled_hash
ORDER BY step
