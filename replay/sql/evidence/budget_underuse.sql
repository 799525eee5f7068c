-- Evidence of budget_underuse: the steps in $from_step..$to_step that left half their token
-- budget or more unused while requests waited on something other than the budget (some of
-- those waiting at the step's start still did after its waiting pass).
SELECT step, token_budget, num_scheduled_tokens, num_waiting_before, admission_stop
FROM steps
WHERE step BETWEEN $from_step AND $to_step AND num_waiting_before > num_new_reqs + num_resumed_reqs
  AND admission_stop <> 'budget' AND 2 * (token_budget - num_scheduled_tokens) >= token_budget
ORDER BY step
