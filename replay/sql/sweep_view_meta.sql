-- A sweep result's facts: one (key, value) row per fact of `sweep_meta`.
SELECT key, value FROM sweep_meta
