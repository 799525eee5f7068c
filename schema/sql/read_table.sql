-- Reads every column of a table to its last byte, so that each block's checksum is checked:
-- one row of hashes, no use beyond the reading. $1: the table's name (qualified by its
-- database when attached).
SELECT bit_xor(hash(COLUMNS(*))) FROM query_table($1)
