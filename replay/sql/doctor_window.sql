-- The doctor's window, steps $from_step..$to_step: its first and last recorded step, the steps
-- that ran schedule(), the tokens they scheduled and the token budget they had.
SELECT
    min(step) AS first_step,
    max(step) AS last_step,
    count(*) FILTER (NOT idle)::INTEGER AS num_busy_steps,
    coalesce(sum(num_scheduled_tokens), 0)::BIGINT AS num_scheduled_tokens,
    coalesce(sum(token_budget) FILTER (NOT idle), 0)::BIGINT AS token_budget
FROM _steps
WHERE step BETWEEN $from_step AND $to_step
