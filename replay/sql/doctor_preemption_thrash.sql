-- Each request preempted in steps $from_step..$to_step, most preempted first: how often, the
-- computed tokens thrown away (recomputed when it resumes), its first and last preemption.
SELECT
    r.request_id,
    count(*)::INTEGER AS num_preemptions,
    sum(p.num_computed_tokens_discarded)::BIGINT AS tokens_recomputed,
    min(p.step) AS first_step,
    max(p.step) AS last_step
FROM _preemptions p
JOIN _requests r ON r.request_index = p.request_index
WHERE p.step BETWEEN $from_step AND $to_step
GROUP BY r.request_id, p.request_index
ORDER BY num_preemptions DESC, tokens_recomputed DESC, p.request_index
