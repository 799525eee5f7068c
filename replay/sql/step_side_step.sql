-- The `steps` row of step $1: budgets, counts, free blocks, why each pass stopped.
SELECT *
FROM steps
WHERE step = $1
