-- Preemption storms: runs of steps with preemptions no more than 8 steps apart (3+ preemptions), and their repeat victims.
WITH preemption_steps AS (
    SELECT DISTINCT step FROM _preemptions
),
marked AS (
    SELECT step, CASE WHEN step - lag(step) OVER (ORDER BY step) <= 8 THEN 0 ELSE 1 END AS starts
    FROM preemption_steps
),
numbered AS (
    SELECT step, sum(starts) OVER (ORDER BY step) AS storm FROM marked
),
victims AS (
    SELECT n.storm, p.request_index, count(*) AS times, sum(p.num_computed_tokens_discarded) AS discarded
    FROM _preemptions p
    JOIN numbered n USING (step)
    GROUP BY ALL
),
spans AS (
    SELECT n.storm, min(p.step) AS first_step, max(p.step) AS last_step, count(*) AS num_preemptions
    FROM _preemptions p
    JOIN numbered n USING (step)
    GROUP BY n.storm
)
SELECT
    s.storm,
    s.first_step,
    s.last_step,
    s.last_step - s.first_step + 1 AS num_steps,
    s.num_preemptions,
    count(*) AS num_victims,
    sum(v.discarded) AS tokens_discarded,
    list(r.request_id ORDER BY v.times DESC, r.request_index) FILTER (v.times > 1) AS repeat_victims,
    max(v.times) AS max_preemptions_of_one_request
FROM spans s
JOIN victims v USING (storm)
JOIN _requests r USING (request_index)
GROUP BY s.storm, s.first_step, s.last_step, s.num_preemptions
HAVING s.num_preemptions >= 3
ORDER BY s.storm
