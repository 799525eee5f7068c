-- Every block a table's data lies in: (block_id BIGINT), one row per block, repeats included.
-- $1: the table's name (qualified by its database when attached).
SELECT unnest(list_prepend(block_id, additional_block_ids)) AS block_id
FROM pragma_storage_info($1)
WHERE block_id >= 0
