-- A sweep result's grid points with their metrics, in grid order.
SELECT * FROM sweep_points ORDER BY point
