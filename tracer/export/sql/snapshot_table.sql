-- One logical table's rows of a window of steps, in stored order. $1: the table's name
-- (`_steps`, ...: one with a `step` column); $2, $3: the window's first and last step.
SELECT * FROM query_table($1) WHERE step BETWEEN $2 AND $3
