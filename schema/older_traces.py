"""An older trace read through today's tables: a column it lacks reads as "off".

A column added in a later schema version is missing from an older trace's table;
its logical table (`member_views.logical_select`) selects it as its "off" value
(NULL, or 0 for a count), and a missing table has no rows, so every view and query
binds to one set of columns whatever version wrote the file.
"""

from __future__ import annotations

_OFF_VALUES = {
    ("_config", "num_speculative_tokens"): "0",
    ("_config", "prefix_cache_retention_interval"): "0",
    ("_block_ids", "kv_cache_group"): "0",
    ("_checkpoint_requests", "group_block_ids"): "[]",
    ("_checkpoint_requests", "group_num_cached_blocks"): "[]",
    ("_checkpoint_requests", "shared_prefix_boundary"): "0",
}
"""Columns whose "off" value is not NULL."""


def off_column(table: str, column: str, sql_type: str) -> str:
    """The select item that reads a column missing from `table` as its "off" value."""
    return f"CAST({_OFF_VALUES.get((table, column), 'NULL')} AS {sql_type}) AS {column}"
