-- The columns of a recording's `_steps` Parquet files ($1: their paths), to type them as a
-- reader does (a column a file lacks reads as its "off" value).
DESCRIBE SELECT * FROM read_parquet($1)
