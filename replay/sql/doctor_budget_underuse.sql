-- Steps in $from_step..$to_step that left half their token budget or more unused while
-- requests waited (some of those waiting at its start still did after its waiting pass),
-- by why that pass stopped (the budget itself excepted), the most tokens left unused first:
-- the steps, the tokens left, and the budget those steps had.
SELECT
    CAST(admission_stop AS VARCHAR) AS admission_stop,
    count(*)::INTEGER AS num_steps,
    sum(token_budget - num_scheduled_tokens)::BIGINT AS tokens_unused,
    sum(token_budget)::BIGINT AS token_budget,
    min(step) AS first_step,
    max(step) AS last_step
FROM _steps
WHERE step BETWEEN $from_step AND $to_step
  AND NOT idle
  AND num_waiting_before > num_new_reqs + num_resumed_reqs
  AND admission_stop <> 'budget'
  AND 2 * (token_budget - num_scheduled_tokens) >= token_budget
GROUP BY admission_stop
ORDER BY tokens_unused DESC, admission_stop
