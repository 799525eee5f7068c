-- The last interesting step before $1: a preemption, a full KV cache, or the token budget used up.
SELECT max(step)
FROM _steps
WHERE step < $1
  AND (num_preemptions > 0
       OR admission_stop IN ('kv_full', 'kv_full_sequence', 'budget')
       OR running_pass_end = 'budget')
