-- Sums for a least-squares fit of step time against scheduled tokens and requests.
SELECT
    count(*) AS n,
    sum(x1) AS s1, sum(x2) AS s2, sum(x1 * x1) AS s11, sum(x1 * x2) AS s12, sum(x2 * x2) AS s22,
    sum(y) AS sy, sum(x1 * y) AS s1y, sum(x2 * y) AS s2y, sum(y * y) AS syy
FROM (
    SELECT
        CAST(num_scheduled_tokens AS DOUBLE) AS x1,
        CAST(num_scheduled_reqs AS DOUBLE) AS x2,
        (schedule_ns + model_ns + update_ns) / 1e9 AS y
    FROM _steps
    WHERE NOT idle AND schedule_ns IS NOT NULL
)
