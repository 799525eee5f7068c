"""Bytes each stored table takes in a trace file, from where its segments lie in the blocks.

DuckDB does not report a segment's size; segments sharing a block are laid out one
after another, so a segment takes from its offset to the next segment's offset in
the same block (or the block's end), plus any whole blocks it spills into.
"""

from __future__ import annotations

import duckdb

from .sql_files import query
from .trace_file import stored_tables


def table_bytes(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Each stored table's bytes on disk, largest first (free space inside a block included)."""
    ((block_size,),) = con.execute(query(__package__, "database_size")).fetchall()
    segments = []
    for table in stored_tables(con):
        rows = con.execute(query(__package__, "table_segments"), [table]).fetchall()
        segments += [(block, offset, table, extra) for _, block, offset, extra in rows]
    segments.sort()
    sizes: dict[str, int] = {}
    for position, (block, offset, table, extra) in enumerate(segments):
        following = segments[position + 1] if position + 1 < len(segments) else None
        end = following[1] if following is not None and following[0] == block else block_size
        sizes[table] = sizes.get(table, 0) + end - offset + extra * int(block_size)
    return dict(sorted(sizes.items(), key=lambda item: -item[1]))
